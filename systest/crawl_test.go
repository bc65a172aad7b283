package systest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// amqpURL is the RabbitMQ of the tests: AMQP_URL, or the machine's.
func amqpURL() string { return envconf.Load(os.Getenv).AMQPURL }

// stack is a whole drover on loopback: Temporal dev server, in-memory Kafka,
// a scheduler and a worker, all on free ports.
type stack struct {
	*services
	sched   *node.Scheduler
	workers *temporalnode.Workers
}

func startStack(t *testing.T) *stack { return withWorkers(t, startBareStack(t)) }

// startBareStack is startStack without in-process workers: Temporal, kfake
// and a scheduler, for worker processes to join.
func startBareStack(t *testing.T) *stack { return withScheduler(t, startServices(t)) }

// withScheduler adds an in-process scheduler to sv.
func withScheduler(t *testing.T, sv *services) *stack {
	t.Helper()
	return &stack{services: sv, sched: nodetest.StartScheduler(t, node.SchedulerConfig{SeenPath: filepath.Join(t.TempDir(), "seen")})}
}

// withWorkers adds in-process workers to s.
func withWorkers(t *testing.T, s *stack) *stack {
	t.Helper()
	s.workers = startWorkers(t, s.temporal.Client(), "test-worker", []string{s.sched.Addr()}, s.kafka.Addr())
	return s
}

// startWorkers starts in-process Temporal workers on c, as identity, whose
// fetch sessions go to schedulers and whose pages go to the Kafka at
// brokers; they stop at the end of the test.
func startWorkers(t *testing.T, c client.Client, identity string, schedulers []string, brokers string) *temporalnode.Workers {
	t.Helper()
	w, err := temporalnode.StartWorkers(c, temporalnode.WorkerConfig{Identity: identity, Activities: &activities.Activities{
		Schedulers: schedulers, Token: session.DevToken, KafkaBrokers: brokers, Identity: identity,
	}})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	return w
}

// readTopic reads every record of the topic (devstack.ReadTopic), bounded
// by readTopicFor.
func readTopic(t *testing.T, brokers, topic string, want int) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), readTopicFor)
	defer cancel()
	out, err := devstack.ReadTopic(ctx, brokers, topic)
	require.NoError(t, err, "%d of %d records read", len(out), want)
	return out
}

// readTopicFor bounds readTopic.
const readTopicFor = 2 * time.Minute

// TestAcceptanceCrawl: a test web of 5 hosts and
// 2,000+ pages crawled by the whole stack; the campaign completes by
// itself; the server saw every page exactly once and nothing disallowed; a
// Kafka consumer reads every page exactly once, byte-identical.
func TestAcceptanceCrawl(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 5, PagesPerHost: 400, CrossHost: true, Base: 31})
	s := startStack(t)
	cfg := s.newCampaign("accept", web, 4)
	cfg.PerHostDelay = new(time.Millisecond)
	cfg.PerHostConcurrency = 2
	start := time.Now()
	st := ctResult(t, ctStartCampaign(t, s.temporal.Client(), cfg), 8*time.Minute)
	took := time.Since(start)
	pages := web.Pages()
	t.Logf("campaign %s: %s, %d pages in %s (%.0f pages/s)", cfg.ID, st.State, len(pages), took, float64(len(pages))/took.Seconds())
	require.Equal(t, campaign.StateCompleted, st.State, "campaign state (%s)", st.Reason)
	checkFetchedOnce(t, web)
	recs := readTopic(t, s.kafka.Addr(), s.topic, len(pages))
	got := map[string]int{}
	for _, m := range recs {
		u := string(m.Key)
		got[u]++
		if body, ok := web.Body(u); ok {
			assert.True(t, bytes.Equal(body, m.Value), "record of %s: %d bytes differ from the %d the server sent", u, len(m.Value), len(body))
		}
	}
	for _, u := range pages {
		assert.Equal(t, 1, got[u], "page %s: records in Kafka", u)
	}
	assert.Equal(t, len(pages), len(recs), "records in Kafka")
}

// checkFetchedOnce fails the test for every page of web not requested,
// requested more than once, or disallowed by robots.txt and requested.
func checkFetchedOnce(t *testing.T, web *testweb.Web) {
	t.Helper()
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}
	d := web.Duplicates()
	assert.Empty(t, d, "%d URLs requested more than once", len(d))
	assert.Empty(t, web.DisallowedHits(), "disallowed URLs requested")
}

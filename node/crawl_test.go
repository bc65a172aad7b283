package node_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/session"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/workflows"
)

func amqpURL() string {
	if u := os.Getenv("AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// stack is a whole drover on loopback: Temporal dev server, in-memory Kafka,
// a scheduler and a worker, all on free ports.
type stack struct {
	temporal *devstack.Temporal
	kafka    *devstack.Kafka
	sched    *node.Scheduler
	workers  *node.Workers
	topic    string
}

func startStack(t *testing.T) *stack {
	t.Helper()
	s := startBareStack(t)
	w, err := node.StartWorkers(s.temporal.Client(), node.WorkerConfig{Identity: "test-worker", Activities: &activities.Activities{
		Schedulers: []string{s.sched.Addr()}, Token: session.DevToken, KafkaBrokers: s.kafka.Addr(), Identity: "test-worker",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	s.workers = w
	return s
}

// startBareStack is startStack without in-process workers: Temporal, kfake
// and a scheduler, for worker processes to join.
func startBareStack(t *testing.T) *stack {
	t.Helper()
	ctx := context.Background()
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmp.Stop() })
	topic := fmt.Sprintf("pages-%d", rand.IntN(1e9))
	k, err := devstack.StartKafka("127.0.0.1:0", topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sched, err := node.StartScheduler(ctx, node.SchedulerConfig{Server: frontier.DefaultServerConfig(), Listen: "127.0.0.1:0", AMQPURL: amqpURL(), SeenPath: t.TempDir() + "/seen", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sched.Close() })
	return &stack{temporal: tmp, kafka: k, sched: sched, topic: topic}
}

// readTopic reads every record of the topic until none arrives for a while.
func readTopic(t *testing.T, brokers, topic string, want int) []kafka.Message {
	t.Helper()
	// Each partition is read up to the end offset the broker reports, so
	// that a slow fetch on a loaded machine is waited for instead of taken
	// for the end (a 2 s pause in reading once cut a partition short);
	// bounded by readTopicFor in all.
	ctx, cancel := context.WithTimeout(context.Background(), readTopicFor)
	defer cancel()
	var out []kafka.Message
	for p := range devstack.KafkaPartitions {
		conn, err := kafka.DialLeader(ctx, "tcp", brokers, topic, p)
		if err != nil {
			t.Fatalf("reading %s[%d]: %v", topic, p, err)
		}
		end, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatalf("reading %s[%d]'s end offset: %v", topic, p, err)
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
		for next := int64(0); next < end; {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("reading %s[%d] at %d of %d: %v (%d of %d records read)", topic, p, next, end, err, len(out), want)
			}
			out = append(out, m)
			next = m.Offset + 1
		}
		r.Close()
	}
	return out
}

// readTopicFor bounds readTopic.
const readTopicFor = 2 * time.Minute

// TestAcceptanceCrawl is issue 2's acceptance: a test web of 5 hosts and
// 2,000+ pages crawled by the whole stack; the campaign completes by
// itself; the server saw every page exactly once and nothing disallowed; a
// Kafka consumer reads every page exactly once, byte-identical.
func TestAcceptanceCrawl(t *testing.T) {
	web, err := testweb.Start(testweb.Config{Hosts: 5, PagesPerHost: 400, CrossHost: true, Base: 31})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	s := startStack(t)
	cfg := campaign.Config{
		ID:                 fmt.Sprintf("accept-%d", rand.IntN(1e9)),
		Seeds:              web.Seeds(),
		Fetchers:           4,
		PerHostDelay:       new(time.Millisecond),
		PerHostConcurrency: 2,
		AllowPrivate:       true,
		Sinks:              []string{"kafka://" + s.kafka.Addr() + "/" + s.topic},
	}
	start := time.Now()
	run, err := s.temporal.Client().ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: cfg.ID, TaskQueue: workflows.TaskQueue,
	}, workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var st workflows.Status
	if err := run.Get(ctx, &st); err != nil {
		t.Fatalf("campaign: %v", err)
	}
	took := time.Since(start)
	pages := web.Pages()
	t.Logf("campaign %s: %s, %d pages in %s (%.0f pages/s)", cfg.ID, st.State, len(pages), took, float64(len(pages))/took.Seconds())
	if st.State != campaign.StateCompleted {
		t.Fatalf("state %s (%s), want completed", st.State, st.Reason)
	}
	if m := web.Missing(); len(m) > 0 {
		t.Errorf("%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}
	if d := web.Duplicates(); len(d) > 0 {
		t.Errorf("%d URLs requested more than once: %v", len(d), d)
	}
	if d := web.DisallowedHits(); len(d) > 0 {
		t.Errorf("disallowed URLs requested: %v", d)
	}
	recs := readTopic(t, s.kafka.Addr(), s.topic, len(pages))
	got := map[string]int{}
	for _, m := range recs {
		u := string(m.Key)
		got[u]++
		if body, ok := web.Body(u); ok && !bytes.Equal(body, m.Value) {
			t.Errorf("record of %s: %d bytes differ from the %d the server sent", u, len(m.Value), len(body))
		}
	}
	for _, u := range pages {
		if got[u] != 1 {
			t.Errorf("page %s: %d records in Kafka, want 1", u, got[u])
		}
	}
	if len(recs) != len(pages) {
		t.Errorf("%d records in Kafka, want %d", len(recs), len(pages))
	}
}

package systest_test

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/chaos"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kafkaDownFor is the outage's length, paced on purpose: within the
// sessions' store retries (2 min), so that fetched pages wait in the
// fetchers and are stored when Kafka returns, and long enough that a crawl
// that did not hold back would fetch far more than the two requests per
// fetcher slot the test allows meanwhile.
const kafkaDownFor = 30 * time.Second

// TestKafkaOutage: Kafka unreachable for 30 s in the middle of a crawl; the
// crawl holds back, continues when Kafka returns and completes with every
// page in the topic.
func TestKafkaOutage(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 150, CrossHost: true, Base: 33})
	tmp := startTemporal(t, devstack.TemporalOptions{UIPort: -1})
	topic := fmt.Sprintf("pages-%d", rand.IntN(1e9))
	k, err := chaos.StartGatedKafka(topic)
	require.NoError(t, err)
	t.Cleanup(k.Close)
	brokers := k.Addr
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{Log: log})
	startWorkers(t, tmp.Client(), "outage-worker", []string{sched.Addr()}, brokers)

	cfg := campaign.Config{
		ID: fmt.Sprintf("outage-%d", rand.IntN(1e9)), Seeds: web.Seeds(), Fetchers: 2,
		PerHostDelay: new(10 * time.Millisecond), AllowPrivate: true,
		Sinks: []string{"kafka://" + brokers + "/" + topic},
	}
	run := ctStartCampaign(t, tmp.Client(), cfg)
	pages := web.Pages()
	await.For(t, 2*time.Minute, 20*time.Millisecond, "a third of the crawl", func() error {
		if n := web.Total(); n < len(pages)/3 {
			return fmt.Errorf("%d requests", n)
		}
		return nil
	})
	k.SetDown(true)
	downAt, before := time.Now(), web.Total()
	time.Sleep(kafkaDownFor)
	during := web.Total() - before
	k.SetDown(false)
	t.Logf("Kafka down for %s: the web saw %d requests meanwhile (of %d pages)", time.Since(downAt).Round(time.Second), during, len(pages))

	st := ctResult(t, run, 4*time.Minute)
	require.Equal(t, campaign.StateCompleted, st.State, "campaign state (%s)", st.Reason)
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested: %v", len(m), m[:min(5, len(m))])
	}
	got := map[string]int{}
	for _, m := range readTopic(t, brokers, topic, len(pages)) {
		got[string(m.Key)]++
	}
	missing := 0
	for _, u := range pages {
		if got[u] == 0 {
			missing++
		}
	}
	assert.Zero(t, missing, "pages (of %d) missing in the topic after the outage", len(pages))
	assert.LessOrEqual(t, during, 2*cfg.Fetchers*cfg.WithDefaults().FetcherConcurrency, "the crawl did not hold back: requests while Kafka was down")
}

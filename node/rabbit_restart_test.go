package node_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/chaos"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// rabbitDownFor is the fault's length, paced on purpose: RabbitMQ stays
// stopped this long so that the scheduler's dials fail about ten times
// (it dials again once a second) and the fleet runs out of leases, not a
// blip that a single retry hides.
const rabbitDownFor = 10 * time.Second

// startRabbitNode starts a RabbitMQ node of the test's own (its own name,
// port and data directory, beside the machine's), so that the test may
// stop and start it without touching anyone else's queues.
func startRabbitNode(t *testing.T) *chaos.RabbitNode {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := chaos.StartRabbitNode(ctx, "", os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Stop)
	return n
}

// Issue 13: RabbitMQ stops for 10 s in the middle of a crawl (stop_app,
// then start_app, on a node of the test's own). The scheduler does not
// exit: it dials again, its campaigns consume again, and the campaign
// completes with every page fetched and stored.
func TestRabbitMQRestartMidCrawl(t *testing.T) {
	rmq := startRabbitNode(t)
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 200, CrossHost: true, Base: 68})
	s := startBareStack(t)
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{AMQPURL: rmq.URL, SeenPath: filepath.Join(t.TempDir(), "seen")})
	startWorkers(t, s.temporal.Client(), "test-worker", []string{sched.Addr()}, s.kafka.Addr())
	cfg := s.newCampaign("rmq-restart", web, 4)
	cfg.PerHostDelay = new(10 * time.Millisecond)
	run := ctStartCampaign(t, s.temporal.Client(), cfg)
	total := len(web.Pages())
	await.For(t, 2*time.Minute, 50*time.Millisecond, "a third of the crawl", func() error { return ctAtLeastRequested(web, total/3) })
	if err := rmq.Ctl(context.Background(), "stop_app"); err != nil {
		t.Log(err)
	}
	down := time.Now()
	atStop := ctPagesRequested(web)
	time.Sleep(rabbitDownFor)
	if err := rmq.Ctl(context.Background(), "start_app"); err != nil {
		t.Log(err)
	}
	up := time.Now()
	t.Logf("RabbitMQ down %s, at %d of %d pages", up.Sub(down).Round(100*time.Millisecond), atStop, total)
	resumed := await.For(t, 2*time.Minute, 100*time.Millisecond, "fetching to resume", func() error { return ctAtLeastRequested(web, atStop+11) })
	st := ctResult(t, run, 4*time.Minute)
	select {
	case err := <-sched.Done():
		t.Fatalf("the scheduler exited: %v", err)
	default:
	}
	if st.State != campaign.StateCompleted {
		t.Fatalf("campaign ended %s: %s", st.State, st.Reason)
	}
	if m := web.Missing(); len(m) > 0 {
		t.Errorf("%d pages never fetched, e.g. %v", len(m), m[:min(3, len(m))])
	}
	stored := map[string]bool{}
	for _, m := range readTopic(t, s.kafka.Addr(), s.topic, total) {
		stored[string(m.Key)] = true
	}
	for _, u := range web.Pages() {
		if !stored[u] {
			t.Errorf("page %s not in Kafka", u)
		}
	}
	dups := 0
	for _, n := range web.Duplicates() {
		dups += n - 1
	}
	t.Logf("fetching resumed %s after RabbitMQ came back; %d pages, %d duplicate fetches", resumed.Sub(up).Round(100*time.Millisecond), total, dups)
}

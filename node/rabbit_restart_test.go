package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/session"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/testweb"
)

// Issue 13: RabbitMQ stops for 10 s in the middle of a crawl (stop_app,
// then start_app, on a node of the test's own). The scheduler does not
// exit: it dials again, its campaigns consume again, and the campaign
// completes with every page fetched and stored.
func TestRabbitMQRestartMidCrawl(t *testing.T) {
	rmq := startRabbitNode(t)
	web, err := testweb.Start(testweb.Config{Hosts: 3, PagesPerHost: 200, CrossHost: true, Base: 68})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	s := startBareStack(t)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	sched, err := node.StartScheduler(context.Background(), node.SchedulerConfig{Server: frontier.DefaultServerConfig(), Listen: "127.0.0.1:0", AMQPURL: rmq.url, SeenPath: t.TempDir() + "/seen", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sched.Close() })
	w, err := node.StartWorkers(s.temporal.Client(), node.WorkerConfig{Identity: "test-worker", Activities: &activities.Activities{
		Schedulers: []string{sched.Addr()}, Token: session.DevToken, KafkaBrokers: s.kafka.Addr(), Identity: "test-worker",
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	cfg := campaign.Config{
		ID:           fmt.Sprintf("rmq-restart-%d", rand.IntN(1e9)),
		Seeds:        web.Seeds(),
		Fetchers:     4,
		PerHostDelay: new(10 * time.Millisecond),
		AllowPrivate: true,
		Sinks:        []string{"kafka://" + s.kafka.Addr() + "/" + s.topic},
	}
	run := ctStartCampaign(t, s.temporal.Client(), cfg)
	total := len(web.Pages())
	ctWaitFor(t, 2*time.Minute, 50*time.Millisecond, "a third of the crawl", func() bool { return ctPagesRequested(web) >= total/3 })
	rmq.ctl(t, "stop_app")
	down := time.Now()
	atStop := ctPagesRequested(web)
	time.Sleep(10 * time.Second) // the fault's length, on purpose
	rmq.ctl(t, "start_app")
	up := time.Now()
	t.Logf("RabbitMQ down %s, at %d of %d pages", up.Sub(down).Round(100*time.Millisecond), atStop, total)
	resumed := ctWaitFor(t, 2*time.Minute, 100*time.Millisecond, "fetching to resume", func() bool { return ctPagesRequested(web) > atStop+10 })
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

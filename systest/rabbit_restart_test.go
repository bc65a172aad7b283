package systest_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/chaos"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	testenv.NeedsRabbitMQ(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := chaos.StartRabbitNode(ctx, "", os.Stderr)
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	return n
}

// TestRabbitMQRestartMidCrawl: RabbitMQ stops for rabbitDownFor in the
// middle of a crawl (stop_app, then start_app, on a node of the test's
// own). Pages are held half-sent while it stops, so that the stop finds
// leases out and pages still to fetch. While RabbitMQ is down the
// scheduler has stopped consuming and hands out no lease: the only page
// requests the web sees are those of leases out when consuming broke
// whose request had not started (a fetcher finishes what it was leased;
// the outcome is void). The scheduler does not exit: it dials again, its
// campaign consumes again, and the campaign completes with every page
// fetched and stored.
func TestRabbitMQRestartMidCrawl(t *testing.T) {
	rmq := startRabbitNode(t)
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 200, CrossHost: true, Base: 68})
	s := startBareStack(t)
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{AMQPURL: rmq.URL, SeenPath: filepath.Join(t.TempDir(), "seen")})
	c := s.temporal.Client()
	startWorkers(t, c, "test-worker", []string{sched.Addr()}, s.kafka.Addr())
	cfg := s.newCampaign("rmq-restart", web, 4)
	cfg.PerHostDelay = new(10 * time.Millisecond)
	run := ctStartCampaign(t, c, cfg)
	total := len(web.Pages())
	await.For(t, 2*time.Minute, 50*time.Millisecond, "a third of the crawl", func() error { return ctAtLeastRequested(web, total/3) })

	key := ctFrontierKey(t, c, cfg.ID)
	stats := func() session.Stats {
		st, _ := sched.Server().Stats(key) // the error is RabbitMQ's queue counts; the scheduler's own are in st
		return st
	}
	if st := stats(); !st.Consuming {
		require.FailNowf(t, "the scheduler is not consuming", "before the stop the scheduler is not consuming the campaign's queues: %+v", st)
	}
	// Held from before the stop until consuming is known broken: the stop
	// catches fetches under way however long stop_app takes.
	ctHoldAPage(t, web)
	require.NoError(t, rmq.Ctl(context.Background(), "stop_app"), "stopping RabbitMQ")
	down := time.Now()
	var atLoss session.Stats
	await.For(t, 30*time.Second, 20*time.Millisecond, "the scheduler to notice RabbitMQ gone (not consuming, a consume error)", func() error {
		if atLoss = stats(); atLoss.Consuming || atLoss.ConsumeError == "" {
			return fmt.Errorf("consuming %v, consume error %q", atLoss.Consuming, atLoss.ConsumeError)
		}
		return nil
	})
	// Read in this order: the leases out, then the pages held mid-body
	// (each a request of one of those leases), then the requests. No lease
	// is granted while the scheduler is not consuming and a lease is
	// fetched once, so every page request from here on is one of the
	// leases out whose request had not started: at most leasesOut-held.
	leasesOut := int(atLoss.InFlight)
	held := web.Held()
	reqsAtLoss := pageRequests(web)
	atStop := ctPagesRequested(web)
	require.NotZero(t, leasesOut, "the outage hit no work in flight: leases out when consuming broke (%d pages held mid-body)", held)
	require.NotZero(t, held, "the outage hit no work in flight: pages held mid-body when consuming broke (%d leases out)", leasesOut)
	require.Less(t, atStop, total, "the crawl was over (%d of %d pages requested) when RabbitMQ stopped: the test proves nothing", atStop, total)
	web.ReleaseBodies()
	await.Holds(t, rabbitDownFor, 100*time.Millisecond, "fetching stalled while RabbitMQ is down", func() error {
		if n := pageRequests(web) - reqsAtLoss; n > leasesOut-held {
			return fmt.Errorf("%d page requests since consuming broke, more than the %d leases out then less the %d already requested (held)", n, leasesOut, held)
		}
		return nil
	})
	duringOutage := pageRequests(web) - reqsAtLoss
	beforeStart := ctPagesRequested(web)
	require.Less(t, beforeStart, total, "every page was requested while RabbitMQ was down (%d of %d)", beforeStart, total)
	require.NoError(t, rmq.Ctl(context.Background(), "start_app"), "starting RabbitMQ")
	up := time.Now()
	t.Logf("RabbitMQ down %s, at %d of %d pages; %d leases out and %d pages held mid-body when consuming broke; %d page requests while down (%d pages requested at its end)",
		up.Sub(down).Round(100*time.Millisecond), atStop, total, leasesOut, held, duringOutage, beforeStart)
	resumed := await.For(t, 2*time.Minute, 100*time.Millisecond, "fetching to resume", func() error { return ctAtLeastRequested(web, beforeStart+10) })
	st := ctResult(t, run, 4*time.Minute)
	select {
	case err := <-sched.Done():
		require.FailNowf(t, "the scheduler exited", "the scheduler exited: %v", err)
	default:
	}
	require.Equal(t, campaign.StateCompleted, st.State, "campaign ended: %s", st.Reason)
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never fetched", "%d pages never fetched, e.g. %v", len(m), m[:min(3, len(m))])
	}
	stored := map[string]bool{}
	for _, m := range readTopic(t, s.kafka.Addr(), s.topic, total) {
		stored[string(m.Key)] = true
	}
	for _, u := range web.Pages() {
		assert.True(t, stored[u], "page %s not in Kafka", u)
	}
	dups := 0
	for _, n := range web.Duplicates() {
		dups += n - 1
	}
	t.Logf("fetching resumed %s after RabbitMQ came back; %d pages, %d duplicate fetches", resumed.Sub(up).Round(100*time.Millisecond), total, dups)
}

// pageRequests counts the web's requests, robots.txt excluded, a URL
// requested twice counted twice.
func pageRequests(web *testweb.Web) int {
	n := 0
	for _, r := range web.Requests() {
		if u, err := url.Parse(r.URL); err != nil || u.Path != "/robots.txt" {
			n++
		}
	}
	return n
}

package activities

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/relay"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
)

// amqpVia is AMQP_URL's RabbitMQ reached through addr.
func amqpVia(t *testing.T, addr string) string {
	t.Helper()
	u, err := url.Parse(envconf.Load(os.Getenv).AMQPURL)
	require.NoError(t, err)
	u.Host = addr
	return u.String()
}

// cutRounds is how many times TestDrainCountsEveryConsumer cuts the
// scheduler's connection (DROVER_CUT_ROUNDS, default 3).
func cutRounds(t *testing.T) int {
	n, err := strconv.Atoi(os.Getenv("DROVER_CUT_ROUNDS"))
	if err != nil || n <= 0 {
		return 3
	}
	return n
}

// TestDrainCountsEveryConsumer: a scheduler's RabbitMQ connection is cut
// on its own side while it holds the last URLs of a crawl. The scheduler
// voids what it held and dials again at once, but RabbitMQ keeps the old
// connection, its consumers and its unacked deliveries until it notices
// the peer is gone. Those URLs are then nowhere the scheduler counts: not
// queued, not held. Monitor must not call the campaign drained while
// RabbitMQ counts a consumer that no scheduler answers for; when the old
// connection ends, its deliveries come back and the crawl completes.
func TestDrainCountsEveryConsumer(t *testing.T) {
	testenv.NeedsRabbitMQ(t) // each round starts a scheduler: skip the test, not only its rounds
	for round := range cutRounds(t) {
		t.Run(fmt.Sprintf("round-%d", round), testDrainAfterACut)
	}
}

func testDrainAfterACut(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 6, Base: 60})
	cutter := relay.NewCutter(t, amqpHostPort(t))
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{AMQPURL: amqpVia(t, cutter.Addr())}).Addr()
	cfg := campaign.Config{
		ID:           fmt.Sprintf("t-cut-%d", rand.IntN(1e9)),
		Seeds:        web.Seeds(),
		PerHostDelay: new(5 * time.Millisecond),
		AllowPrivate: true,
		Sinks:        []string{"warc:/unused"},
	}.WithDefaults()
	require.NoError(t, cfg.Validate())
	seedURLs(t, sched, cfg, cfg.Seeds...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		session.Client{Token: session.DevToken}.CloseEverywhere(ctx, []string{sched}, cfg.ID, true)
	})

	// The seed, the crawl's only URL so far, is leased and held: the fault
	// below hits work in flight.
	holder, l := holdLease(t, sched, cfg)
	st := ctlStats(t, sched, cfg.ID)
	require.Equal(t, int64(1), st.InFlight, "the held lease of %s: %+v", l.URL, st)
	require.Equal(t, int64(0), st.Queued, "nothing else queued: %+v", st)

	require.Positive(t, cutter.Cut(), "no connection to cut")
	// The scheduler consumes again on a new connection while the old one
	// still holds the seed's delivery; the holder's lease can no longer be
	// acked, and it goes.
	waitReading(t, sched, cfg.ID, "consuming again on a new connection", func(st session.Stats) bool {
		return st.Answering == 1 && st.Consumers >= 2
	})
	holder.Close()
	waitReading(t, sched, cfg.ID, "the void lease gone", func(st session.Stats) bool { return st.InFlight == 0 })

	a := &Activities{Schedulers: []string{sched}, Token: session.DevToken}
	res := waitMonitor(t, runMonitor(a, workflows.MonitorInput{Config: cfg, Report: 4 * time.Second}), monitorWait)
	require.False(t, res.Drained, "drained while RabbitMQ holds the seed on a connection no scheduler answers for: %+v", res.Stats)
	require.Equal(t, 1, cutter.Held(), "the old connection was held through Monitor's readings")

	// RabbitMQ sees the old connection end and requeues the seed; a fleet
	// crawls the web, and only then is the campaign drained.
	cutter.Release()
	sk := sink.NewMemory()
	runFleet(t, cfg, sched, sk, 2)
	result := runMonitor(a, workflows.MonitorInput{Config: cfg, Report: 2 * monitorWait})
	res = waitMonitor(t, result, 3*monitorWait)
	require.True(t, res.Drained, "not drained: %+v", res.Stats)
	await.For(t, monitorWait, 50*time.Millisecond, "every page stored", func() error {
		stored := map[string]bool{}
		for _, p := range sk.Pages() {
			stored[p.URL] = true
		}
		var missing []string
		for _, u := range web.Pages() {
			if !stored[u] {
				missing = append(missing, u)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("%d of %d pages missing: %v", len(missing), len(web.Pages()), missing)
		}
		return nil
	})
	// Counted by the web server: every page was served.
	require.Empty(t, web.Missing(), "pages the web server never served")
}

// waitReading is waitStats for a scheduler that may not read RabbitMQ's
// counts for a while (it dials again after a cut).
func waitReading(t *testing.T, addr, id, what string, ok func(session.Stats) bool) {
	t.Helper()
	await.For(t, monitorWait, 50*time.Millisecond, what, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := session.Client{Token: session.DevToken}.CampaignStats(ctx, []string{addr}, id)
		if err != nil {
			return err
		}
		if !ok(st) {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
}

// amqpHostPort is AMQP_URL's host:port.
func amqpHostPort(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(envconf.Load(os.Getenv).AMQPURL)
	require.NoError(t, err)
	return u.Host
}

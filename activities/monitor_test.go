package activities

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/relay"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
)

// The Monitor activity's drain rule, as production runs it: Monitor's own
// code in an activity environment, reading the stats of a real scheduler
// over RabbitMQ. Its readings pass through a gate (a TCP proxy in front of
// the scheduler's control port: each reading is one control connection),
// so that the test decides what happens between two readings.

// startTestScheduler runs a scheduler (its seen store in memory) over
// AMQP_URL's RabbitMQ on a free loopback port.
func startTestScheduler(t *testing.T) string {
	t.Helper()
	return nodetest.StartScheduler(t, node.SchedulerConfig{}).Addr()
}

// statsGate is a TCP proxy to a scheduler that holds each connection (one
// Monitor reading) until the test lets it through, unless it is open.
type statsGate struct {
	ln      net.Listener
	target  string
	open    atomic.Bool
	arrived chan int      // the index (1, 2, ...) of a reading at the gate
	pass    chan struct{} // one token lets one held reading through
}

func startGate(t *testing.T, target string) *statsGate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	g := &statsGate{ln: ln, target: target, arrived: make(chan int, 64), pass: make(chan struct{})}
	relay.Serve(t, ln, target, func(n int, quit <-chan struct{}) bool {
		if g.open.Load() {
			return true
		}
		g.arrived <- n
		select {
		case <-g.pass:
			return true
		case <-quit:
			return false
		}
	})
	return g
}

// monitorWait bounds a wait for Monitor: a reading every second, and a
// slow 2-core machine running -race.
const monitorWait = 20 * time.Second

// next waits for the next reading to reach the gate, failing the test if
// Monitor returned instead (with why, which says what that means).
func (g *statsGate) next(t *testing.T, result <-chan monitorRun, why string) int {
	t.Helper()
	select {
	case n := <-g.arrived:
		return n
	case r := <-result:
		require.FailNowf(t, "Monitor returned", "%s: Monitor returned %+v (%v)", why, r.res, r.err)
	case <-time.After(monitorWait):
		require.FailNowf(t, "no Monitor reading", "no Monitor reading within %s", monitorWait)
	}
	return 0
}

type monitorRun struct {
	res workflows.MonitorResult
	err error
}

// runMonitor runs the Monitor activity in a test activity environment,
// and delivers its result.
func runMonitor(a *Activities, in workflows.MonitorInput) <-chan monitorRun {
	out := make(chan monitorRun, 1)
	go func() {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestActivityEnvironment()
		env.RegisterActivity(a)
		var r monitorRun
		v, err := env.ExecuteActivity(a.Monitor, in)
		if r.err = err; err == nil {
			r.err = v.Get(&r.res)
		}
		out <- r
	}()
	return out
}

func waitMonitor(t *testing.T, result <-chan monitorRun, within time.Duration) workflows.MonitorResult {
	t.Helper()
	select {
	case r := <-result:
		require.NoError(t, r.err, "Monitor")
		return r.res
	case <-time.After(within):
		require.FailNowf(t, "Monitor did not return", "Monitor did not return within %s", within)
	}
	return workflows.MonitorResult{}
}

// ctlStats reads the campaign's stats straight from the scheduler.
func ctlStats(t *testing.T, addr, id string) session.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := session.Client{Token: session.DevToken}.CampaignStats(ctx, []string{addr}, id)
	require.NoError(t, err)
	return st
}

func waitStats(t *testing.T, addr, id, what string, ok func(session.Stats) bool) session.Stats {
	t.Helper()
	var st session.Stats
	await.For(t, monitorWait, 50*time.Millisecond, what, func() error {
		if st = ctlStats(t, addr, id); !ok(st) {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	return st
}

func seedURLs(t *testing.T, addr string, cfg campaign.Config, urls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctl, err := session.Client{Token: session.DevToken}.DialControl(ctx, addr)
	require.NoError(t, err)
	defer ctl.Close()
	n, err := ctl.Seed(ctx, cfg, urls)
	require.NoError(t, err)
	require.Equal(t, len(urls), n, "seeded")
}

// runFleet runs n Runners against addr until the test ends.
func runFleet(t *testing.T, cfg campaign.Config, addr string, sk sink.Sink, n int) {
	t.Helper()
	fl := sessiontest.NewFleet(t)
	for i := range n {
		f, err := fetch.New(cfg)
		require.NoError(t, err)
		fl.Go(i, []string{addr}, cfg, NewRunner(cfg, f, sk, i, "test").Run, func() { f.Close() })
	}
}

// holdLease opens a session that answers robots.txt leases (a 404: all
// allowed) and holds the first page lease it gets without reporting it.
func holdLease(t *testing.T, addr string, cfg campaign.Config) (*session.Session, session.Lease) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := session.Client{Token: session.DevToken}.DialSession(ctx, addr, "holder", cfg, 4)
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	sess.Credit(4)
	timeout := time.After(monitorWait)
	for {
		select {
		case l, ok := <-sess.Leases():
			require.True(t, ok, "session ended: %v", sess.Err())
			if l.Kind == session.KindRobots {
				sess.Report(session.Outcome{LeaseID: l.ID, Robots: &session.RobotsBody{Status: 404}})
				continue
			}
			return sess, l
		case <-timeout:
			require.FailNowf(t, "no page lease", "no page lease within %s", monitorWait)
		}
	}
}

func TestMonitorDrainRule(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 8, Base: 60})
	sched := startTestScheduler(t)
	gate := startGate(t, sched)
	cfg := campaign.Config{
		ID:           fmt.Sprintf("t-monitor-%d", rand.IntN(1e9)),
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
		session.CloseVia(ctx, []string{sched}, func(ctx context.Context, addr string) (session.CampaignCloser, error) {
			return session.Client{Token: session.DevToken}.DialControl(ctx, addr)
		}, cfg.ID, true)
	})
	a := &Activities{Schedulers: []string{gate.ln.Addr().String()}, Token: session.DevToken}

	// 1. A lease is out and nothing moves: every reading is the same, and
	// none is idle. Monitor reports without saying drained.
	holder, l := holdLease(t, sched, cfg)
	gate.open.Store(true)
	res := waitMonitor(t, runMonitor(a, workflows.MonitorInput{Config: cfg, Report: 3 * time.Second}), monitorWait)
	require.False(t, res.Drained, "drained while the lease of %s is out: %+v", l.URL, res.Stats)
	require.False(t, res.CapReached)
	require.Equal(t, int64(1), res.Stats.InFlight, "the held lease, in the stats Monitor returned: %+v", res.Stats)
	require.False(t, res.Unread, "a window with readings")
	require.WithinDuration(t, time.Now(), res.ReadAt, monitorWait, "when its stats were read")

	// The lease goes back; a fleet crawls the web to its end.
	holder.Close()
	sk := sink.NewMemory()
	runFleet(t, cfg, sched, sk, 2)
	done := waitStats(t, sched, cfg.ID, "the crawl done", func(st session.Stats) bool {
		stored := map[string]bool{}
		for _, p := range sk.Pages() {
			stored[p.URL] = true
		}
		for _, u := range web.Pages() {
			if !stored[u] {
				return false
			}
		}
		return st.Idle()
	})

	// 2. Idle, then a URL seeded, fetched and acked, then idle again: not
	// drained until two idle readings with nothing between them. (A seed
	// is not counted in Published, so it is the ack that tells.)
	gate.open.Store(false)
	result := runMonitor(a, workflows.MonitorInput{Config: cfg, Report: time.Minute})
	gate.next(t, result, "before its first reading")
	gate.pass <- struct{}{} // reading 1: idle
	gate.next(t, result, "drained after one idle reading")
	seedURLs(t, sched, cfg, web.Seeds()[0]+"monitor-extra.html") // a 404: one more page
	waitStats(t, sched, cfg.ID, "the extra URL fetched and acked", func(st session.Stats) bool {
		return st.Idle() && st.Fetched == done.Fetched+1 && st.Acked > done.Acked
	})
	gate.pass <- struct{}{} // reading 2: idle, but an ack since reading 1
	gate.next(t, result, "drained although a URL was acked between the two idle readings")
	gate.pass <- struct{}{} // reading 3: idle, as reading 2
	res = waitMonitor(t, result, monitorWait)
	require.True(t, res.Drained, "not drained after two identical idle readings: %+v", res)
	require.Equal(t, done.Fetched+1, res.Stats.Fetched, "the stats of the last reading")

	// 3. Max pages: with the cap at the pages fetched and failed so far,
	// the first reading ends Monitor with CapReached (not drained); with
	// the cap one page higher, it is not reached.
	gate.open.Store(true)
	capped := cfg
	capped.MaxPages = res.Stats.Fetched + res.Stats.Failed
	res = waitMonitor(t, runMonitor(a, workflows.MonitorInput{Config: capped, Report: time.Minute}), monitorWait)
	require.True(t, res.CapReached, "cap %d not reached at %+v", capped.MaxPages, res.Stats)
	require.False(t, res.Drained)
	capped.MaxPages++
	res = waitMonitor(t, runMonitor(a, workflows.MonitorInput{Config: capped, Report: 3 * time.Second}), monitorWait)
	require.False(t, res.CapReached, "cap %d reached at %+v", capped.MaxPages, res.Stats)

	// 4. A continuous campaign drains between its revisits, and that ends
	// nothing: on the same idle frontier Monitor reads on to the end of
	// its window, rather than returning within two readings (which would
	// start an activity every two seconds for as long as it runs).
	continuous := cfg
	continuous.Revisit = []campaign.RevisitRule{{Min: time.Hour}}
	res = waitMonitor(t, runMonitor(a, workflows.MonitorInput{Config: continuous, Report: 4 * time.Second}), monitorWait)
	require.False(t, res.Drained, "a continuous campaign drained: %+v", res)
	require.False(t, res.Unread)
}

// pagesRequested counts the distinct URLs webs served, robots.txt aside.
func pagesRequested(webs ...*testweb.Web) int {
	seen := map[string]bool{}
	for _, w := range webs {
		for _, r := range w.Requests() {
			if u, err := url.Parse(r.URL); err == nil && u.Path != "/robots.txt" {
				seen[r.URL] = true
			}
		}
	}
	return len(seen)
}

// TestMonitorCapCountsFailedPages: max-pages counts every outcome the
// scheduler records for a URL, pages (any status, a 404 included: Fetched)
// and permanent failures without a response (Failed). A campaign over two
// sites, one of which never finishes a body, reaches its cap only by
// counting the failures: Monitor must end it there (CapReached), and the
// scheduler must lease nothing beyond the cap.
//
// Site ok serves its pages, its 404 and its other extras; every page of
// site held sends its head and half its body, then nothing: with one
// attempt per URL and a 1 s response timeout each is a permanent failure
// (reason timeout, after a response began, so not held against the host,
// whose URLs keep being leased one by one). The cap is all of site ok's
// pages plus half of site held's: the pages alone can never reach it.
func TestMonitorCapCountsFailedPages(t *testing.T) {
	ok := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 10, Base: 83})
	held := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 8, NoExtras: true, Base: 84})
	held.HoldBodies()
	t.Cleanup(held.ReleaseBodies) // before the web closes (cleanups run last first)
	missing := "http://" + ok.Hosts()[0] + "/missing"
	require.Contains(t, ok.Pages(), missing)
	total := len(ok.Pages()) + len(held.Pages())

	sched := startTestScheduler(t)
	cfg := campaign.Config{
		ID: fmt.Sprintf("t-monitor-cap-%d", rand.IntN(1e9)),
		// The 404 is a seed (depth 0) so that it is among the first of its
		// host's URLs leased, whatever share of that host the cap leaves.
		Seeds:        append(append(ok.Seeds(), missing), held.Pages()...),
		MaxPages:     int64(len(ok.Pages()) + len(held.Pages())/2),
		MaxAttempts:  1,
		PerHostDelay: new(20 * time.Millisecond),
		AllowPrivate: true,
		Sinks:        []string{"warc:/unused"},
	}.WithDefaults()
	require.NoError(t, cfg.Validate())
	seedURLs(t, sched, cfg, cfg.Seeds...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		session.CloseVia(ctx, []string{sched}, func(ctx context.Context, addr string) (session.CampaignCloser, error) {
			return session.Client{Token: session.DevToken}.DialControl(ctx, addr)
		}, cfg.ID, true)
	})

	timeouts := fetch.DefaultTimeouts()
	timeouts.ResponseHeader, timeouts.Response = time.Second, time.Second
	fl := sessiontest.NewFleet(t)
	sk := sink.NewMemory()
	for i := range 2 {
		f, err := fetch.New(cfg, fetch.WithTimeouts(timeouts))
		require.NoError(t, err)
		fl.Go(i, []string{sched}, cfg, NewRunner(cfg, f, sk, i, "test").Run, func() { f.Close() })
	}

	// Site held fails a URL about every second: the cap is reached within
	// seconds. Monitor reports after Report at the latest, without
	// CapReached if it did not see the cap.
	a := &Activities{Schedulers: []string{sched}, Token: session.DevToken}
	res := waitMonitor(t, runMonitor(a, workflows.MonitorInput{Config: cfg, Report: 30 * time.Second}), time.Minute)
	st := res.Stats
	t.Logf("Monitor: cap reached %v at %d pages fetched + %d failed, %d queued", res.CapReached, st.Fetched, st.Failed, st.Queued)
	require.True(t, res.CapReached, "Monitor did not end the campaign at its cap of %d: %d pages fetched, %d failed (%+v)", cfg.MaxPages, st.Fetched, st.Failed, st)
	require.False(t, res.Drained)
	require.True(t, st.CapReached, "the scheduler does not count the cap reached: %+v", st)
	require.Equal(t, cfg.MaxPages, st.Fetched+st.Failed, "pages fetched and failed at the cap: %+v", st)
	require.Less(t, st.Fetched, cfg.MaxPages, "the pages alone reached the cap: no failure was needed")
	require.Positive(t, st.Failed, "no failure counted: %+v", st)
	// The failures by reason, from the scheduler itself: the workflow
	// keeps only the counts.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	full, err := session.Client{Token: session.DevToken}.CampaignStats(sctx, []string{sched}, cfg.FrontierKey())
	require.NoError(t, err)
	require.Equal(t, full.Failed, full.FailedBy["timeout"], "every failure is a held body timing out: %v", full.FailedBy)
	require.Positive(t, full.FailedBy["4xx"], "the 404, a page, not among the outcomes: %v", full.FailedBy)

	// Every lease was a request, each URL once; the URLs beyond the cap
	// stay unleased, and stay so while the fleet keeps asking for work
	// (3 s is 150 times the per-host delay).
	require.Equal(t, int(cfg.MaxPages), pagesRequested(ok, held), "distinct pages requested at the cap")
	require.Empty(t, ok.Duplicates())
	require.Empty(t, held.Duplicates())
	require.Equal(t, total-int(cfg.MaxPages), len(ok.Missing())+len(held.Missing()), "pages never requested")
	await.Holds(t, 3*time.Second, 50*time.Millisecond, "nothing leased beyond the cap", func() error {
		if n := pagesRequested(ok, held); n != int(cfg.MaxPages) {
			return fmt.Errorf("%d distinct pages requested, cap %d", n, cfg.MaxPages)
		}
		if now := ctlStats(t, sched, cfg.ID); now.Fetched+now.Failed != cfg.MaxPages || now.InFlight != 0 || now.Queued+now.Held == 0 {
			return fmt.Errorf("stats %+v", now)
		}
		return nil
	})
}

// A window in which no scheduler answers is no reading: Monitor says so
// (Unread), and does not hand the workflow zeros to take for counts.
func TestMonitorWithNoSchedulerIsUnread(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close()) // nothing listens there now: refused
	cfg := campaign.Config{ID: "t-monitor-unread", Seeds: []string{"http://127.0.0.1:9/"}, Sinks: []string{"warc:/unused"}}.WithDefaults()
	a := &Activities{Schedulers: []string{addr}, Token: session.DevToken}
	res := waitMonitor(t, runMonitor(a, workflows.MonitorInput{Config: cfg, Report: 2 * time.Second}), monitorWait)
	require.True(t, res.Unread, "Monitor read nothing from %s, and returned %+v", addr, res)
	require.True(t, res.ReadAt.IsZero(), "no reading has a time")
}

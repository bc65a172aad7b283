package frontier_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nextLease waits for one lease on sess.
func nextLease(t *testing.T, sess *session.Session, within time.Duration) session.Lease {
	t.Helper()
	select {
	case l, ok := <-sess.Leases():
		require.True(t, ok, "session ended waiting for a lease: %v", sess.Err())
		return l
	case <-time.After(within):
		require.FailNowf(t, "no lease", "no lease within %s", within)
	}
	return session.Lease{}
}

// TestEndSessionsByKey ends one of a campaign's two sessions through the
// control session (OpEnd), as the workflow does on a pause: the ended
// session hears FrameEnd, gets no lease for the credit it still sends,
// and the outcome it reports after the end is recorded (the page is not
// fetched again); a reconnect under its key is refused with ErrEnded, as
// is a key ended before its session ever dialed; the other session goes
// on.
func TestEndSessionsByKey(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 50, Base: 36})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	cfg.Seeds = web.Pages()[:10] // reported without links: the rest stays queued
	cfg.PerHostConcurrency = 10  // so that the host could take the credit given after the end
	cfg.PerHostDelay = new(time.Duration(0))
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := session.Client{Token: session.DevToken}
	dial := func(key string) (*session.Session, error) {
		return cl.DialSessionKey(ctx, sched.addr, "fetcher-"+key, key, cfg, 4)
	}
	a, err := dial("run/a")
	require.NoError(t, err)
	defer a.Close()
	b, err := dial("run/b")
	require.NoError(t, err)
	defer b.Close()

	// The host's robots.txt first, then one page held by a.
	a.Credit(1)
	rl := nextLease(t, a, 10*time.Second)
	require.Equal(t, session.KindRobots, rl.Kind, "first lease %+v: want the host's robots.txt", rl)
	a.Report(session.Outcome{LeaseID: rl.ID, Robots: &session.RobotsBody{Status: 404}})
	a.Credit(1)
	page := nextLease(t, a, 10*time.Second)
	require.Equal(t, session.KindPage, page.Kind, "second lease %+v: want a page", page)

	n, err := ctl.EndSessions(ctx, cfg.ID, []string{"run/a"})
	require.NoError(t, err, "EndSessions")
	require.Equal(t, 1, n, "EndSessions: sessions open")
	select {
	case <-a.Ended():
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the ended session heard no FrameEnd within 5 s")
	}
	select {
	case <-b.Ended():
		require.FailNow(t, "the session not named was ended too")
	default:
	}
	// Credit after the end is ignored: the scheduler holds 1 lease (the
	// page), not 1 + 8, half a second later.
	a.Credit(8)
	time.Sleep(500 * time.Millisecond)
	require.Equal(t, int64(1), stats(t, ctl, cfg.ID).InFlight, "after the end and 8 more credit: leases out, want 1 (the held page)")
	late, open := <-a.Leases()
	require.False(t, open, "lease %+v delivered after FrameEnd", late)
	// The page held at the end is reported afterwards, and counts.
	a.Report(session.Outcome{LeaseID: page.ID, Stored: true, Status: 200})
	require.NoError(t, a.Close())
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the page reported after the end recorded", func(st session.Stats) bool {
		return st.Fetched == 1 && st.InFlight == 0 && st.Pending == 0
	})

	_, err = dial("run/a")
	require.ErrorIs(t, err, session.ErrEnded, "reconnect of an ended key")
	// A key ended before its session dialed (it was away, reconnecting):
	// refused too, on a scheduler the campaign's end reached first.
	n, err = ctl.EndSessions(ctx, cfg.ID, []string{"run/c"})
	require.NoError(t, err, "EndSessions of a key with no session")
	require.Equal(t, 0, n, "EndSessions of a key with no session: sessions open")
	_, err = dial("run/c")
	require.ErrorIs(t, err, session.ErrEnded, "dial of a key ended beforehand")

	b.Credit(1)
	l := nextLease(t, b, 10*time.Second)
	require.Equal(t, session.KindPage, l.Kind, "the other session's lease %+v: want a page", l)
}

// TestEndSessionsPastAHungScheduler ends a session on a scheduler listed
// after one that accepts connections and never answers: the end reaches
// the live one at once (the schedulers are called together, each within
// its own bound), and the hung one is reported as an error.
func TestEndSessionsPastAHungScheduler(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 5, Base: 36})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer hung.Close()
	go func() {
		for {
			c, err := hung.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := session.Client{Token: session.DevToken}
	sess, err := cl.DialSessionKey(ctx, sched.addr, "fetcher-a", "run/a", cfg, 4)
	require.NoError(t, err)
	defer sess.Close()
	// The welcome comes before the actor counts the session: an end sent
	// in between refuses it instead (ErrEnded, and 0 ended).
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the session open", func(st session.Stats) bool { return st.Sessions == 1 })

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := cl.EndSessions(ctx, []string{hung.Addr().String(), sched.addr}, cfg.ID, []string{"run/a"})
		done <- result{n, err}
	}()
	select {
	case <-sess.Ended():
	case r := <-done:
		require.FailNowf(t, "EndSessions returned early", "EndSessions returned (%d, %v) before the live scheduler ended the session", r.n, r.err)
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the live scheduler's session was not ended while the hung one held EndSessions")
	}
	endedAt := time.Now()
	r := <-done
	// Called one after the other, the live scheduler would have been
	// reached only once the hung one's bound (5 s) ran out, just before
	// EndSessions returned.
	waited := time.Since(endedAt)
	assert.GreaterOrEqual(t, waited, 2*time.Second, "EndSessions returned %s after the session ended: the live scheduler waited for the hung one", waited.Round(time.Millisecond))
	require.Equal(t, 1, r.n, "EndSessions: (%d, %v); want 1 ended and an error naming the hung scheduler %s", r.n, r.err, hung.Addr())
	require.ErrorContains(t, r.err, hung.Addr().String(), "EndSessions: (%d, %v); want 1 ended and an error naming the hung scheduler", r.n, r.err)
}

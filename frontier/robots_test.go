package frontier_test

import (
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// robotsTTLForTests is the robots.txt TTL of these tests' schedulers.
const robotsTTLForTests = time.Second

// oneLease gives one credit and returns the one lease that comes.
func oneLease(t *testing.T, f *rawFetcher) session.Lease {
	t.Helper()
	ls := f.leases(t, 1)
	require.Len(t, ls, 1, "leases for one credit")
	return ls[0]
}

// wantRobotsLease fails the test unless l is the robots lease of origin.
func wantRobotsLease(t *testing.T, l session.Lease, origin, when string) {
	t.Helper()
	require.Equal(t, session.KindRobots, l.Kind, "%s: leased %s %q, want the robots.txt of %s", when, l.Kind, l.URL, origin)
	require.Equal(t, origin, l.URL, "%s: leased %s %q, want the robots.txt of %s", when, l.Kind, l.URL, origin)
}

// A host's robots.txt is fetched again once its TTL has passed, and the
// new rules are the ones that count. Rules past their TTL do not settle
// links either: a link the old rules disallowed, found after the TTL and
// before the new rules came, is queued, and fetched when the new rules
// allow it.
func TestRobotsFetchedAgainAfterItsTTL(t *testing.T) {
	cfg := frontier.DefaultServerConfig()
	cfg.RobotsTTL = robotsTTLForTests
	sched := startScheduler(t, cfg, seen.NewMemory())
	const origin = "http://127.66.30.1:9"
	ccfg := handCampaign(t, origin+"/a", origin+"/b")
	ctl, f := seedHand(t, sched.addr, ccfg)

	r := oneLease(t, f)
	wantRobotsLease(t, r, origin, "first lease")
	f.report(t, session.Outcome{LeaseID: r.ID, Robots: &session.RobotsBody{Status: 200, Body: []byte("User-agent: *\nDisallow: /private\n")}})
	held := oneLease(t, f)
	require.Equal(t, session.KindPage, held.Kind, "second lease %+v, want a page", held)
	// Past the TTL, with the page still out: its link to /private is judged
	// by no rules (the old ones expired), so it is queued.
	time.Sleep(robotsTTLForTests + 200*time.Millisecond)
	f.report(t, session.Outcome{LeaseID: held.ID, Stored: true, Status: 200, Links: []urlrule.Link{{URL: origin + "/private/x"}}})
	r = oneLease(t, f)
	wantRobotsLease(t, r, origin, "the lease after the TTL")
	// The new rules allow everything: the rest of the host is fetched.
	f.report(t, session.Outcome{LeaseID: r.ID, Robots: &session.RobotsBody{Status: 200, Body: []byte("User-agent: *\nDisallow:\n")}})
	want := map[string]bool{origin + "/a": true, origin + "/b": true, origin + "/private/x": true}
	delete(want, held.URL)
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
		require.True(t, want[l.URL], "leased %q, not one of %v", l.URL, want)
		delete(want, l.URL)
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return len(want) == 0
	})

	st := waitStats(t, ctl, ccfg.ID, 20*time.Second, "the campaign drained", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0
	})
	assert.Equal(t, int64(3), st.Fetched, "fetched %d (want 3), disallowed %d, failed by robots %d", st.Fetched, st.Disallowed, st.FailedBy[frontier.ReasonRobots])
	assert.Zero(t, st.Disallowed, "fetched %d (want 3), disallowed %d, failed by robots %d", st.Fetched, st.Disallowed, st.FailedBy[frontier.ReasonRobots])
	assert.Zero(t, st.FailedBy[frontier.ReasonRobots], "fetched %d (want 3), disallowed %d, failed by robots %d", st.Fetched, st.Disallowed, st.FailedBy[frontier.ReasonRobots])
}

// A host whose robots.txt fails for good while one of its pages is out
// settles that page when it comes back, released by its fetcher or lost
// with its session: dead-lettered with the host's reason. Pushed back into
// the host's queue, it was never leased again (a failed host has no work)
// and the campaign never drained.
func TestHoleRobotsDownLeaseBack(t *testing.T) {
	testenv.NeedsRabbitMQ(t) // each case starts a scheduler: skip the test, not only its cases
	for _, back := range []string{"released", "lost"} {
		t.Run(back, func(t *testing.T) {
			cfg := frontier.DefaultServerConfig()
			cfg.RobotsTTL = robotsTTLForTests
			sched := startScheduler(t, cfg, seen.NewMemory())
			const origin = "http://127.66.31.1:9"
			ccfg := handCampaign(t, origin+"/a", origin+"/b")
			retries, backoff := 0, 100*time.Millisecond
			ccfg.HostRetries, ccfg.RetryBackoff = &retries, &backoff
			// Two at a time, so that the robots.txt is fetched again while
			// a page is out.
			ccfg.PerHostConcurrency = 2
			ctl, f := seedHand(t, sched.addr, ccfg)

			r := oneLease(t, f)
			wantRobotsLease(t, r, origin, "first lease")
			f.report(t, session.Outcome{LeaseID: r.ID, Robots: &session.RobotsBody{Status: 404}})
			held := oneLease(t, f)
			require.Equal(t, session.KindPage, held.Kind, "second lease %+v, want a page", held)
			time.Sleep(robotsTTLForTests + 200*time.Millisecond)
			r = oneLease(t, f)
			wantRobotsLease(t, r, origin, "the lease after the TTL")
			f.report(t, session.Outcome{LeaseID: r.ID, Robots: &session.RobotsBody{Error: "dial tcp: connect: connection refused"},
				Error: "connection refused", Reason: "refused", HostDown: true})
			// The host is down: the queued page is dead-lettered, the one out
			// is not yet.
			waitStats(t, ctl, ccfg.ID, 20*time.Second, "the queued page dead-lettered", func(st session.Stats) bool {
				return st.HostsDown == 1 && st.DeadQueued == 1 && st.InFlight == 1
			})
			switch back {
			case "released":
				f.report(t, session.Outcome{LeaseID: held.ID, Released: true})
			case "lost":
				f.c.Close()
			}
			st := waitStats(t, ctl, ccfg.ID, 20*time.Second, "the page out settled", func(st session.Stats) bool {
				return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0 && st.DeadQueued == 2
			})
			assert.Equal(t, int64(2), st.FailedBy["refused"], "failed by reason %v (want 2 refused), %d fetched", st.FailedBy, st.Fetched)
			assert.Zero(t, st.Fetched, "failed by reason %v (want 2 refused), %d fetched", st.FailedBy, st.Fetched)
		})
	}
}

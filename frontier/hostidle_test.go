package frontier_test

import (
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A host idle for the scheduler's HostIdle is forgotten, and its next URL
// makes it again: its robots.txt is fetched again before its page, the
// new rules judge its URLs, and its count of pages fetched came through,
// so max-pages-per-host still counts the page fetched before.
func TestIdleHostForgottenAndMadeAgain(t *testing.T) {
	cfg := frontier.DefaultServerConfig()
	cfg.HostIdle = 0
	sched := startScheduler(t, cfg, seen.NewMemory())
	const a, b = "http://127.66.31.1:9", "http://127.66.31.2:9"
	ccfg := handCampaign(t, a+"/1", b+"/1")
	ccfg.MaxPagesPerHost = 2
	ctl, f := seedHand(t, sched.addr, ccfg)

	disallowPrivate := &session.RobotsBody{Status: 200, Body: []byte("User-agent: *\nDisallow: /private\n")}
	leased := map[string]session.Lease{}
	f.pages(t, 2, 20*time.Second, disallowPrivate, func(l session.Lease) bool {
		leased[l.URL] = l
		return len(leased) == 2
	})
	require.Contains(t, leased, a+"/1")
	require.Contains(t, leased, b+"/1")
	// a's one page is done; b's stays out, so that b is not forgotten.
	f.report(t, session.Outcome{LeaseID: leased[a+"/1"].ID, Stored: true, Status: 200})
	waitStats(t, ctl, ccfg.ID, 20*time.Second, "host a forgotten", func(st session.Stats) bool { return st.HostsForgotten == 1 })

	// b's page links back to a: a is made again, robots.txt first.
	f.report(t, session.Outcome{LeaseID: leased[b+"/1"].ID, Stored: true, Status: 200,
		Links: []urlrule.Link{{URL: a + "/2"}, {URL: a + "/3"}, {URL: a + "/private/x"}}})
	r := oneLease(t, f)
	wantRobotsLease(t, r, a, "the first lease of the host made again")
	f.report(t, session.Outcome{LeaseID: r.ID, Robots: disallowPrivate})
	// Max-pages-per-host 2 with a/1 counted: one of a/2 and a/3 is
	// fetched, the other skipped; the new rules disallow a/private/x.
	var again []string
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool {
		again = append(again, l.URL)
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	require.Subset(t, []string{a + "/2", a + "/3"}, again, "leased after a was made again")
	// Credit for the two left: they are dropped as they come up for a
	// lease, not leased.
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 2}))

	st := waitStats(t, ctl, ccfg.ID, 20*time.Second, "the campaign drained", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0 && st.Fetched+st.Skipped+st.Disallowed == 5
	})
	assert.Equal(t, int64(3), st.Fetched, "fetched a/1, b/1 and one of a/2, a/3: %+v", st)
	assert.Equal(t, int64(1), st.Skipped, "the other of a/2, a/3 over a's max-pages-per-host: %+v", st)
	assert.Equal(t, int64(1), st.Disallowed, "a/private/x by a's robots.txt fetched again: %+v", st)
	assert.Equal(t, int64(2), st.Hosts, "hosts seen, forgotten or not: %+v", st)
	// Both hosts are idle now: both are forgotten, and still counted.
	st = waitStats(t, ctl, ccfg.ID, 20*time.Second, "both hosts forgotten", func(st session.Stats) bool { return st.HostsForgotten == 2 })
	assert.Equal(t, int64(2), st.Hosts, "hosts seen, forgotten or not: %+v", st)
}

// A host whose origin failed once and then answered holds no failure
// state, so it is forgotten when idle like any other; one that still
// counts failures toward being down is not.
func TestHostThatRecoveredIsForgotten(t *testing.T) {
	cfg := frontier.DefaultServerConfig()
	cfg.HostIdle = 0
	sched := startScheduler(t, cfg, seen.NewMemory())
	const a = "http://127.66.31.3:9"
	ccfg := handCampaign(t, a+"/1")
	ccfg.RetryBackoff = new(10 * time.Millisecond)
	ctl, f := seedHand(t, sched.addr, ccfg)

	var tries int
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool {
		tries++
		if tries == 1 {
			f.report(t, session.Outcome{LeaseID: l.ID, Error: "connection refused", Reason: "refused", HostDown: true})
			writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
			return false
		}
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	st := waitStats(t, ctl, ccfg.ID, 20*time.Second, "the host, answered after a refusal, forgotten", func(st session.Stats) bool { return st.HostsForgotten == 1 })
	assert.Equal(t, int64(1), st.Fetched, "%+v", st)
	assert.Equal(t, int64(1), st.Retried, "the refused try retried: %+v", st)
}

package frontier_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// `starter url`: a URL's state as the scheduler knows it, through each
// stage of its life: held, leased, failed or done, and unknown.
func TestURLState(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const host = "http://127.66.73.1:9"
	a, b, c := host+"/a", host+"/b", host+"/c"
	cfg := handCampaign(t, a, b, c)
	ctl, f := seedHand(t, sched.addr, cfg)
	defer f.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	state := func(u string) session.URLState {
		t.Helper()
		st, err := session.Client{Token: session.DevToken}.URLState(ctx, []string{sched.addr}, cfg.FrontierKey(), u)
		require.NoError(t, err)
		return st
	}
	st := state(a)
	assert.Contains(t, []string{session.URLQueued, session.URLHeld}, st.State, "a seed before any session: %+v, want queued or held", st)
	var out session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { out = l; return true })
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "every seed held", func(st session.Stats) bool { return st.Held == 3 })
	st = state(out.URL)
	assert.Equal(t, session.URLLeased, st.State, "the leased URL: %+v", st)
	assert.False(t, st.LeaseDeadline.IsZero(), "the leased URL: %+v", st)
	assert.NotEmpty(t, st.Host, "the leased URL: %+v", st)
	for _, u := range []string{a, b, c} {
		if u != out.URL {
			st := state(u)
			assert.Equal(t, session.URLHeld, st.State, "%s: %+v, want held with 2 URLs queued for its host", u, st)
			assert.Equal(t, 2, st.HostQueue, "%s: %+v, want held with 2 URLs queued for its host", u, st)
		}
	}
	f.report(t, session.Outcome{LeaseID: out.ID, Stored: true, Status: 404, Error: "404 Not Found"})
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
	var next session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { next = l; return true })
	f.report(t, session.Outcome{LeaseID: next.ID, Stored: true, Status: 200})
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "two outcomes recorded", func(st session.Stats) bool { return st.Held == 1 && st.Pending == 0 })
	st = state(out.URL)
	assert.Equal(t, session.URLFailed, st.State, "the 404: %+v, want failed, 4xx", st)
	if assert.NotNil(t, st.Failure, "the 404: %+v, want failed, 4xx", st) {
		assert.Equal(t, "4xx", st.Failure.Reason, "the 404: %+v, want failed, 4xx", st)
	}
	st = state(next.URL)
	assert.Equal(t, session.URLDone, st.State, "the 200: %+v, want done", st)
	st = state(host + "/never")
	assert.Equal(t, session.URLUnknown, st.State, "a URL never queued: %+v, want unknown", st)
	_, err := (session.Client{Token: session.DevToken}).URLState(ctx, []string{sched.addr}, cfg.FrontierKey(), "::not a url")
	assert.Error(t, err, "a URL that does not parse: no error")
}

// `starter urls --state queued` over two schedulers: the one that queued
// a URL lists it from its index until the one that leases it holds it,
// fails it or records it; asked together, they list only what neither
// holds past queued.
func TestQueuedURLsOverTwoSchedulers(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	other := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const host = "http://127.66.73.2:9"
	cfg := handCampaign(t, host+"/a", host+"/b", host+"/c")
	ctl, f := seedHand(t, sched.addr, cfg)
	defer f.c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := session.Client{Token: session.DevToken}
	list := func(addrs ...string) []string {
		t.Helper()
		page, err := cl.URLs(ctx, addrs, cfg.FrontierKey(), session.URLQuery{Host: "127.66.73.2", State: session.URLQueued, Limit: 10})
		require.NoError(t, err, "urls: %+v", page)
		require.Empty(t, page.Next, "urls: %+v", page)
		return page.URLs
	}
	got := list(sched.addr)
	assert.LessOrEqual(t, len(got), 3, "before any session: queued %v, want at most the 3 seeds", got)
	// The other scheduler queues them too, as it would links to them from
	// its pages (their copies are dropped as duplicates where consumed).
	d := host + "/d"
	seeded, err := control(t, other.addr).Seed(ctx, cfg, append(slices.Clone(cfg.Seeds), d))
	require.NoError(t, err, "seed on the other scheduler")
	require.Equal(t, 4, seeded, "seed on the other scheduler: URLs seeded")
	var out session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { out = l; return true })
	f.report(t, session.Outcome{LeaseID: out.ID, Stored: true, Status: 200})
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "the lease recorded, the rest held", func(st session.Stats) bool {
		return st.Held == 3 && st.Pending == 0
	})
	all := append(slices.Clone(cfg.Seeds), d)
	slices.Sort(all)
	assert.Equal(t, all, list(other.addr), "the other scheduler alone: queued, want all it queued")
	assert.Empty(t, list(sched.addr), "the scheduler that leases them: queued, want none (one done, three held)")
	assert.Empty(t, list(sched.addr, other.addr), "both: queued, want none: each is done or held where it is consumed")
}

package frontier_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
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
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	if st := state(a); st.State != session.URLQueued && st.State != session.URLHeld {
		t.Errorf("a seed before any session: %+v, want queued or held", st)
	}
	var out session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { out = l; return true })
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "every seed held", func(st session.Stats) bool { return st.Held == 3 })
	if st := state(out.URL); st.State != session.URLLeased || st.LeaseDeadline.IsZero() || st.Host == "" {
		t.Errorf("the leased URL: %+v", st)
	}
	for _, u := range []string{a, b, c} {
		if u != out.URL {
			if st := state(u); st.State != session.URLHeld || st.HostQueue != 2 {
				t.Errorf("%s: %+v, want held with 2 URLs queued for its host", u, st)
			}
		}
	}
	f.report(t, session.Outcome{LeaseID: out.ID, Stored: true, Status: 404, Error: "404 Not Found"})
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
	var next session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { next = l; return true })
	f.report(t, session.Outcome{LeaseID: next.ID, Stored: true, Status: 200})
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "two outcomes recorded", func(st session.Stats) bool { return st.Held == 1 && st.Pending == 0 })
	if st := state(out.URL); st.State != session.URLFailed || st.Failure == nil || st.Failure.Reason != "4xx" {
		t.Errorf("the 404: %+v, want failed, 4xx", st)
	}
	if st := state(next.URL); st.State != session.URLDone {
		t.Errorf("the 200: %+v, want done", st)
	}
	if st := state(host + "/never"); st.State != session.URLUnknown {
		t.Errorf("a URL never queued: %+v, want unknown", st)
	}
	if _, err := (session.Client{Token: session.DevToken}).URLState(ctx, []string{sched.addr}, cfg.FrontierKey(), "::not a url"); err == nil {
		t.Error("a URL that does not parse: no error")
	}
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
		if err != nil || page.Next != "" {
			t.Fatalf("urls: %+v, %v", page, err)
		}
		return page.URLs
	}
	if got := list(sched.addr); len(got) > 3 {
		t.Errorf("before any session: queued %v, want at most the 3 seeds", got)
	}
	// The other scheduler queues them too, as it would links to them from
	// its pages (their copies are dropped as duplicates where consumed).
	d := host + "/d"
	if n, err := control(t, other.addr).Seed(ctx, cfg, append(slices.Clone(cfg.Seeds), d)); err != nil || n != 4 {
		t.Fatalf("seed on the other scheduler: %d, %v", n, err)
	}
	var out session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { out = l; return true })
	f.report(t, session.Outcome{LeaseID: out.ID, Stored: true, Status: 200})
	waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "the lease recorded, the rest held", func(st session.Stats) bool {
		return st.Held == 3 && st.Pending == 0
	})
	all := append(slices.Clone(cfg.Seeds), d)
	slices.Sort(all)
	if got := list(other.addr); !slices.Equal(got, all) {
		t.Errorf("the other scheduler alone: queued %v, want all it queued, %v", got, all)
	}
	if got := list(sched.addr); len(got) != 0 {
		t.Errorf("the scheduler that leases them: queued %v, want none (one done, three held)", got)
	}
	if got := list(sched.addr, other.addr); len(got) != 0 {
		t.Errorf("both: queued %v, want none: each is done or held where it is consumed", got)
	}
}

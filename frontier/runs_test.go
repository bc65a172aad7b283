package frontier_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
)

// A run of a campaign ID that failed keeps its queues and marks (its Close
// deletes nothing). The next run of the ID fetches the failed page again
// and records its failure again, under its own key; the failed run's
// records and queues go when the new run reaches the scheduler, and a
// fetcher of the old run is refused from then on. Runs sharing one key,
// as every run of an ID did before runs had names, found the page marked
// done: Seed published nothing, and the failure was recorded by no one.
func TestNewRunAfterAFailedRun(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	page := "http://127.66.70.1:9/gone"
	run1 := handCampaign(t, page)
	run1.Run = "0000000001aaa"
	run2 := run1
	run2.Run = "0000000002aaa"
	ctl := control(t, sched.addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	t.Cleanup(func() {
		for _, k := range []string{run1.FrontierKey(), run2.FrontierKey()} {
			ctl.CloseCampaign(context.Background(), k, true)
		}
	})

	fetch404 := func(cfg campaign.Config) {
		t.Helper()
		if n, err := ctl.Seed(ctx, cfg, cfg.Seeds); err != nil || n != 1 {
			t.Fatalf("seeding run %s: %d seeded, %v (want 1)", cfg.Run, n, err)
		}
		f := dialRawFetcher(t, sched.addr, cfg)
		defer f.c.Close()
		f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
			f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 404, Error: "404 Not Found"})
			return l.URL == page
		})
		waitStats(t, ctl, cfg.FrontierKey(), 20*time.Second, "run "+cfg.Run+" settled", func(st session.Stats) bool {
			return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0 && st.Fetched == 1
		})
	}
	failures := func(key string) []failure.Record {
		t.Helper()
		fs, _, err := session.Client{Token: session.DevToken}.Failures(ctx, []string{sched.addr}, key, "")
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}

	fetch404(run1)
	if fs := failures(run1.FrontierKey()); len(fs) != 1 || fs[0].URL != page {
		t.Fatalf("run 1's failure records: %+v", fs)
	}
	// Run 1 fails: its Close keeps its queues and marks.
	if _, err := ctl.CloseCampaign(ctx, run1.FrontierKey(), false); err != nil {
		t.Fatal(err)
	}

	fetch404(run2)
	if fs := failures(run2.FrontierKey()); len(fs) != 1 || fs[0].URL != page || fs[0].Reason != "4xx" {
		t.Errorf("run 2's failure records: %+v (want the page, 4xx)", fs)
	}
	if fs := failures(run1.FrontierKey()); len(fs) != 0 {
		t.Errorf("run 1's failure records outlived run 2's start: %+v", fs)
	}
	// A late fetcher of run 1 is refused: a later run started here.
	c := dialRaw(t, sched.addr)
	writeRaw(t, c, jsonFrame(t, session.FrameHello, session.Hello{Version: session.ProtocolVersion, Token: session.DevToken,
		Role: session.RoleFetcher, Client: "late", Campaign: &run1}))
	if ft, payload, err := readFrame(c, 10*time.Second); err != nil || ft != session.FrameRefused {
		t.Errorf("a fetcher of run 1 after run 2 started: %s %s %v (want refused)", ft, payload, err)
	}
}

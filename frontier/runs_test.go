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
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		seeded, err := ctl.Seed(ctx, cfg, cfg.Seeds)
		require.NoError(t, err, "seeding run %s", cfg.Run)
		require.Equal(t, 1, seeded, "seeding run %s: URLs seeded", cfg.Run)
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
		require.NoError(t, err)
		return fs
	}

	fetch404(run1)
	fs := failures(run1.FrontierKey())
	require.Len(t, fs, 1, "run 1's failure records: %+v", fs)
	require.Equal(t, page, fs[0].URL, "run 1's failure records: %+v", fs)
	// Run 1 fails: its Close keeps its queues and marks.
	_, err := ctl.CloseCampaign(ctx, run1.FrontierKey(), false)
	require.NoError(t, err)

	fetch404(run2)
	fs = failures(run2.FrontierKey())
	if assert.Len(t, fs, 1, "run 2's failure records: %+v (want the page, 4xx)", fs) {
		assert.Equal(t, page, fs[0].URL, "run 2's failure records: %+v (want the page, 4xx)", fs)
		assert.Equal(t, "4xx", fs[0].Reason, "run 2's failure records: %+v (want the page, 4xx)", fs)
	}
	assert.Empty(t, failures(run1.FrontierKey()), "run 1's failure records outlived run 2's start")
	// A late fetcher of run 1 is refused: a later run started here.
	c := dialRaw(t, sched.addr)
	writeRaw(t, c, jsonFrame(t, session.FrameHello, session.Hello{Version: session.ProtocolVersion, Token: session.DevToken,
		Role: session.RoleFetcher, Client: "late", Campaign: &run1}))
	ft, payload, err := readFrame(c, 10*time.Second)
	if assert.NoError(t, err, "a fetcher of run 1 after run 2 started (want refused)") {
		assert.Equal(t, session.FrameRefused, ft, "a fetcher of run 1 after run 2 started: %s %s (want refused)", ft, payload)
	}
}

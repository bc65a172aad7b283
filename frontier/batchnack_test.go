package frontier_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hole: a message of two URLs, one dead-lettered (confirmed), the other
// sent back by a record that failed. Nacked back whole, the message
// brought the dead-lettered URL back as well, its attempts reset, and it
// was fetched again (a parked one came back twice, and each further
// failure doubled it). Only the URL that asked to go back may come back.
func TestHoleBatchSendsBackOnlyWhatAsked(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const origin = "http://127.66.40.1:9"
	pa, pb := origin+"/a", origin+"/b"
	// The link whose publish fails goes to a shard other than the pages'.
	var child string
	for i := 2; child == ""; i++ {
		c := fmt.Sprintf("http://127.66.40.%d:9/child", i)
		if shardOfURL(t, c) != shardOfURL(t, pa) {
			child = c
		}
	}
	cfg := handCampaign(t, pa, pb)
	cfg.MaxAttempts = 1
	retries, backoff := 5, 100*time.Millisecond
	cfg.HostRetries, cfg.RetryBackoff = &retries, &backoff
	cfg.PerHostConcurrency = 2
	fault := &faultOnShard{queue: shardQueue(cfg, child)}
	frontier.SetPublishFault(sched.srv, fault.fault)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	seeded := stats(t, ctl, cfg.ID)
	require.Equal(t, int64(1), seeded.Queued+seeded.Held, "the seeds went out as messages, want one: the test needs a batch (%+v)", seeded)
	f := dialRawFetcher(t, sched.addr, cfg)
	got := map[string]uint64{}
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool { got[l.URL] = l.ID; return len(got) == 2 })

	// b fails for good: dead-lettered, its message not acked yet (a waits).
	f.report(t, session.Outcome{LeaseID: got[pb], HostDown: true, Reason: "refused", Error: "connection refused"})
	waitStats(t, ctl, cfg.ID, 20*time.Second, "b dead-lettered", func(st session.Stats) bool { return st.DeadQueued == 1 })
	// a's record fails: a goes back.
	fault.armed.Store(5)
	f.report(t, session.Outcome{LeaseID: got[pa], Stored: true, Status: 200, Links: []urlrule.Link{{URL: child}}})
	waitStats(t, ctl, cfg.ID, 20*time.Second, "a's record failed", func(st session.Stats) bool { return st.RecordFailed > 0 })
	fault.armed.Store(0)

	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
		require.Equal(t, pa, l.URL, "leased after a's record failed; only a may come back")
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	st := waitStats(t, ctl, cfg.ID, 20*time.Second, "the campaign drained", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0
	})
	assert.Equal(t, int64(1), st.DeadQueued, "dead-lettered %d (queue %d), fetched %d; want 1, 1, 2 (a twice, b never)", st.DeadLettered, st.DeadQueued, st.Fetched)
	assert.Equal(t, int64(1), st.DeadLettered, "dead-lettered %d (queue %d), fetched %d; want 1, 1, 2 (a twice, b never)", st.DeadLettered, st.DeadQueued, st.Fetched)
	assert.Equal(t, int64(2), st.Fetched, "dead-lettered %d (queue %d), fetched %d; want 1, 1, 2 (a twice, b never)", st.DeadLettered, st.DeadQueued, st.Fetched)
}

// shardOfURL is the shard of rawURL's host.
func shardOfURL(t *testing.T, rawURL string) int {
	t.Helper()
	h, err := urlrule.HostKey(rawURL)
	require.NoError(t, err)
	return frontier.ShardOf(h)
}

package frontier_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A host whose connections fail is tried HostRetries more times, with
// backoff, then fails for the campaign: every URL of it held, and every one
// found later, is dead-lettered and recorded with the reason, without a
// lease each, and the campaign drains.
func TestHostDownFailsItsURLs(t *testing.T) {
	store := seen.NewMemory()
	sched := startScheduler(t, frontier.DefaultServerConfig(), store)
	dead := []string{"http://127.66.20.1:9/a", "http://127.66.20.1:9/b", "http://127.66.20.1:9/c"}
	live := "http://127.66.20.2:9/"
	later := "http://127.66.20.1:9/later"
	cfg := handCampaign(t, append([]string{live}, dead...)...)
	retries, backoff := 1, 100*time.Millisecond
	cfg.HostRetries, cfg.RetryBackoff = &retries, &backoff
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)

	f := dialRawFetcher(t, sched.addr, cfg)
	// Robots leases: the dead host's connection is refused each time; the
	// live host has no robots.txt.
	robotsTries := 0
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 4}))
	deadline := time.Now().Add(20 * time.Second)
	gotLive := false
	for time.Now().Before(deadline) && !(gotLive && robotsTries == retries+1) {
		for _, l := range readLeases(t, f, time.Until(deadline)) {
			switch {
			case l.Kind == session.KindRobots && l.URL == "http://127.66.20.1:9":
				robotsTries++
				f.report(t, session.Outcome{LeaseID: l.ID, Robots: &session.RobotsBody{Error: "dial tcp 127.66.20.1:9: connect: connection refused"},
					Error: "connection refused", Reason: "refused", HostDown: true})
			case l.Kind == session.KindRobots:
				f.report(t, session.Outcome{LeaseID: l.ID, Robots: &session.RobotsBody{Status: 404}})
			case l.URL == live:
				gotLive = true
				f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Links: []urlrule.Link{{URL: later}}})
			default:
				require.FailNowf(t, "a URL of the dead host was leased", "a URL of the dead host was leased: %s", l.URL)
			}
			writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
		}
	}
	require.Equal(t, retries+1, robotsTries, "times robots.txt of the dead host was tried (live page leased: %v)", gotLive)
	require.True(t, gotLive, "live page leased (robots.txt of the dead host tried %d times)", robotsTries)
	st := waitStats(t, ctl, cfg.ID, 20*time.Second, "the dead host's URLs settled", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0 && st.DeadQueued == 4
	})
	assert.Equal(t, int64(1), st.HostsDown, "stats: %d hosts down, failed by reason %v, %d fetched", st.HostsDown, st.FailedBy, st.Fetched)
	assert.Equal(t, int64(4), st.FailedBy["refused"], "stats: %d hosts down, failed by reason %v, %d fetched", st.HostsDown, st.FailedBy, st.Fetched)
	assert.Equal(t, int64(1), st.Fetched, "stats: %d hosts down, failed by reason %v, %d fetched", st.HostsDown, st.FailedBy, st.Fetched)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, total, err := session.Client{Token: session.DevToken}.Failures(ctx, []string{sched.addr}, cfg.ID, "refused")
	require.NoError(t, err, "failures: %d listed of %d", len(fs), total)
	require.Equal(t, 4, total, "failures: %d listed of %d", len(fs), total)
	require.Len(t, fs, 4, "failures: %d listed of %d", len(fs), total)
	for _, fr := range fs {
		assert.Equal(t, "refused", fr.Reason, "failure record %+v", fr)
		assert.NotEmpty(t, fr.LastError, "failure record %+v", fr)
		assert.False(t, fr.First.IsZero(), "failure record %+v", fr)
	}
	assert.Equal(t, later, fs[len(fs)-1].URL, "the link found later is not listed: %+v", fs)
}

// readLeases returns the items of the next leases frame, all kinds, pinging
// while it waits.
func readLeases(t *testing.T, f *rawFetcher, within time.Duration) []session.Lease {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ft, payload, err := readFrame(f.c, min(time.Second, time.Until(deadline)))
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			writeRaw(t, f.c, frame(session.FramePing, nil))
			continue
		}
		require.NoError(t, err, "reading leases")
		if ft != session.FrameLeases {
			continue
		}
		var ls session.Leases
		require.NoError(t, json.Unmarshal(payload, &ls))
		return ls.Items
	}
	return nil
}

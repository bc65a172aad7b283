package frontier_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/require"
)

// The sitemaps a robots.txt names that cannot be queued (every publish to
// their shard fails) are settled as failures once their tries are spent:
// recorded, so that `starter failures` lists them, and the campaign
// drains. Before, a log line was all that knew of them when the host had
// no page left to fetch its robots.txt again.
func TestHoleSitemapsNotQueuedAreRecorded(t *testing.T) {
	frontier.SetSitemapRetry(3, 10*time.Millisecond)
	t.Cleanup(func() { frontier.SetSitemapRetry(0, 0) })
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const origin = "http://127.66.60.1:9"
	sitemap := origin + "/sitemap.xml"
	cfg := handCampaign(t, origin+"/")
	cfg.Sitemaps = true
	queue := shardQueue(cfg, sitemap)
	var armed atomic.Bool
	var failed atomic.Int32
	frontier.SetPublishFault(sched.srv, func(exchange, key string) error {
		if armed.Load() && exchange == "" && key == queue {
			failed.Add(1)
			return errors.New("injected publish failure")
		}
		return nil
	})
	ctl, f := seedHand(t, sched.addr, cfg)
	armed.Store(true) // after the seed, which goes to the same shard
	// The robots.txt names the sitemap; the one page has no links.
	robots := &session.RobotsBody{Status: 200, Body: []byte("User-agent: *\nAllow: /\nSitemap: " + sitemap + "\n")}
	f.pages(t, 2, 20*time.Second, robots, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	waitStats(t, ctl, cfg.ID, 20*time.Second, "the campaign drained", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0 && st.Fetched == 1
	})
	require.Equal(t, int32(3), failed.Load(), "publishes failed, want the sitemap's 3 tries: the fault missed")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, _, err := session.Client{Token: session.DevToken}.Failures(ctx, []string{sched.addr}, cfg.ID, "")
	require.NoError(t, err, "failure records %+v; want the sitemap's, reason other, 3 attempts", fs)
	require.Len(t, fs, 1, "failure records %+v; want the sitemap's, reason other, 3 attempts", fs)
	require.Equal(t, sitemap, fs[0].URL, "failure records %+v; want the sitemap's, reason other, 3 attempts", fs)
	require.Equal(t, frontier.ReasonOther, fs[0].Reason, "failure records %+v; want the sitemap's, reason other, 3 attempts", fs)
	require.Contains(t, fs[0].LastError, "sitemap", "failure records %+v; want the sitemap's, reason other, 3 attempts", fs)
	require.Equal(t, 3, fs[0].Attempts, "failure records %+v; want the sitemap's, reason other, 3 attempts", fs)
}

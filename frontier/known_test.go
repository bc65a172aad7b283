package frontier_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/require"
)

// pageLease gives sess credit and answers robots.txt leases (404) until a
// page comes.
func pageLease(t *testing.T, sess *session.Session) session.Lease {
	t.Helper()
	for {
		sess.Credit(1)
		l := nextLease(t, sess, 20*time.Second)
		if l.Kind == session.KindPage {
			return l
		}
		sess.Report(session.Outcome{LeaseID: l.ID, Robots: &session.RobotsBody{Status: 404}})
	}
}

// dialKnown opens a fetcher session of cfg to addr that shares known.
func dialKnown(t *testing.T, addr string, cfg campaign.Config, known *session.KnownLinks) *session.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sess, err := session.Client{Token: session.DevToken, Known: known}.DialSession(ctx, addr, "fetcher-0", cfg, 4)
	require.NoError(t, err)
	t.Cleanup(func() { sess.Close() })
	return sess
}

// waitKnown waits until known holds n links.
func waitKnown(t *testing.T, known *session.KnownLinks, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for known.Len() != n {
		if time.Now().After(deadline) {
			require.FailNowf(t, "known links", "the session knows %d links, want %d", known.Len(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A fetcher learns a link (KnownLinks) only once its scheduler recorded the
// outcome that carried it. Here p's first record fails (the link's publish
// is refused): p comes back, and the session must still report the link,
// or it would never be queued. A session that learnt the link when it
// reported it would leave it out the second time, and this test would
// wait in vain for the link's lease. Once p's record succeeds the link is
// known, and is left out of the next outcome that finds it.
func TestKnownLinksLearnOnlyRecordedOutcomes(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	p := "http://127.66.12.1:9/p"
	cfg := handCampaign(t, p)
	child := "http://127.66.12.2:9/child"
	fault := &faultOnShard{queue: shardQueue(cfg, child)}
	frontier.SetPublishFault(sched.srv, fault.fault)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	known := session.NewKnownLinks(0)
	sess := dialKnown(t, sched.addr, cfg, known)

	lease := func() session.Lease { return pageLease(t, sess) }
	links := []urlrule.Link{{URL: child}}
	first := lease()
	require.Equal(t, p, first.URL, "leased")
	fault.armed.Store(1)
	sess.Report(session.Outcome{LeaseID: first.ID, Stored: true, Status: 200, Links: links})

	// The record failed: p is leased again. A FrameRecorded would have
	// come before this lease on the session (the scheduler tells before
	// it nacks): nothing may have been learnt.
	again := lease()
	require.Equal(t, p, again.URL, "leased, want p again after its failed record")
	require.Zero(t, known.Len(), "links the session knows after a record that failed")
	sess.Report(session.Outcome{LeaseID: again.ID, Stored: true, Status: 200, Links: links})
	l := lease()
	require.Equal(t, child, l.URL, "leased, want the link")
	waitKnown(t, known, 1)
	// The link's own page links to it: left out, and the campaign is done.
	sess.Report(session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Links: links})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the link published once, every outcome settled", func(st session.Stats) bool {
		return st.Published == 1 && st.RecordFailed == 1 && st.Queued == 0 && st.InFlight == 0 && st.Pending == 0 && st.Held == 0
	})
}

// What a fetcher learnt of a campaign's records holds for that campaign's
// life on the scheduler only: the campaign deleted and started again under
// its ID (its queues and seen marks gone), a session sharing the old
// knowledge, as one of the earlier run that outlived it would, still
// reports the link, and the link is crawled again. Known by scheduler name
// alone, the link would be left out and never come.
func TestKnownLinksDoNotOutliveTheCampaign(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	p := "http://127.66.13.1:9/p"
	cfg := handCampaign(t, p)
	child := "http://127.66.13.2:9/child"
	links := []urlrule.Link{{URL: child}}
	ctl := control(t, sched.addr)
	known := session.NewKnownLinks(0)
	for run := 1; run <= 2; run++ {
		seedCampaign(t, ctl, cfg)
		sess := dialKnown(t, sched.addr, cfg, known)
		first := pageLease(t, sess)
		require.Equal(t, p, first.URL, "run %d: leased", run)
		sess.Report(session.Outcome{LeaseID: first.ID, Stored: true, Status: 200, Links: links})
		l := pageLease(t, sess)
		require.Equal(t, child, l.URL, "run %d: leased, want the link", run)
		sess.Report(session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		waitStats(t, ctl, cfg.ID, 10*time.Second, "the campaign drained", func(st session.Stats) bool {
			return st.Published == 1 && st.Queued == 0 && st.InFlight == 0 && st.Pending == 0 && st.Held == 0
		})
		waitKnown(t, known, 1)
		sess.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err := ctl.CloseCampaign(ctx, cfg.ID, true)
		require.NoError(t, err, "run %d: close", run)
		cancel()
	}
}

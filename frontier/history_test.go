package frontier_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A run started with From leases a URL with what the lineage's earlier
// run recorded of it, and a 304 for it leads the crawl on through the
// links that run kept: the page it links to is leased though the 304
// carried no link, and counts as unchanged.
func TestHistoryCarriesARunToTheNext(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const root, child = "http://127.66.76.1:9/", "http://127.66.76.1:9/child"
	capture := &page.Capture{Status: 200, ETag: `"r1"`, LastModified: "Thu, 01 Jan 2026 00:00:00 GMT",
		Digest: "sha1:ROOT", Date: time.Date(2026, 1, 1, 0, 0, 0, 5, time.UTC)}

	run1 := handCampaign(t, root)
	_, f := seedHand(t, sched.addr, run1)
	var leased []string
	f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool {
		leased = append(leased, l.URL)
		assert.Nil(t, l.Prior, "run 1 leased %s with a prior capture: it reads no history", l.URL)
		o := session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Capture: &page.Capture{Status: 200, Digest: "sha1:" + l.URL, Date: capture.Date}}
		if l.URL == root {
			o.Capture = capture
			o.Links = []urlrule.Link{{URL: child}}
		}
		f.report(t, o)
		return len(leased) == 2
	})

	run2 := handCampaign(t, root)
	run2.From = run1.ID
	ctl2, f2 := seedHand(t, sched.addr, run2)
	var priors = map[string]*page.Capture{}
	f2.pages(t, 4, time.Minute, nil, func(l session.Lease) bool {
		priors[l.URL] = l.Prior
		o := session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Capture: l.Prior}
		if l.URL == root {
			// Unchanged: no links; the scheduler has them.
			o.Status, o.Unchanged = 304, page.RevisitNotModified
		}
		f2.report(t, o)
		return len(priors) == 2
	})
	waitStats(t, ctl2, run2.ID, 10*time.Second, "both recorded, the root as unchanged", func(st session.Stats) bool {
		return st.Fetched == 2 && st.Unchanged == 1
	})
	if rp := priors[root]; assert.NotNil(t, rp, "run 2 leased the root with no prior, want %+v", *capture) {
		assert.Equal(t, *capture, *rp, "run 2 leased the root with prior")
	}
	cp, ok := priors[child]
	if assert.True(t, ok, "the child, linked only in run 1's history, was not leased in run 2") &&
		assert.NotNil(t, cp, "run 2 leased the child with no prior") {
		assert.Equal(t, "sha1:"+child, cp.Digest, "run 2 leased the child with prior %+v", cp)
	}
}

// `starter forget` drops a lineage's history: refused while a campaign of
// the lineage is open on the scheduler (run 1, then run 2 reading it with
// --from), done once they closed; the next run that reads the lineage
// then leases its URLs with no prior capture.
func TestForgetHistory(t *testing.T) {
	store := seen.NewMemory()
	sched := startScheduler(t, frontier.DefaultServerConfig(), store)
	const root = "http://127.66.76.2:9/"
	forget := func(lineage string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return session.Client{Token: session.DevToken}.ForgetHistory(ctx, []string{sched.addr}, lineage)
	}
	closeRun := func(ctl *session.Control, id string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := ctl.CloseCampaign(ctx, id, true)
		require.NoError(t, err)
	}
	capture := &page.Capture{Status: 200, ETag: `"r1"`, Digest: "sha1:ROOT", Date: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	fetch := func(cfg campaign.Config) (*session.Control, *page.Capture) {
		ctl, f := seedHand(t, sched.addr, cfg)
		var prior *page.Capture
		f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool {
			prior = l.Prior
			f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Capture: capture})
			return true
		})
		waitStats(t, ctl, cfg.ID, 10*time.Second, "the root recorded", func(st session.Stats) bool { return st.Fetched == 1 })
		return ctl, prior
	}

	run1 := handCampaign(t, root)
	ctl1, _ := fetch(run1)
	b, err := store.History(run1.ID, seen.KeyOf(root))
	require.NoError(t, err, "run 1 left no history of the root")
	require.NotNil(t, b, "run 1 left no history of the root")
	assert.ErrorContains(t, forget(run1.ID), "by campaign "+run1.ID, "forget while run 1 is open: want a refusal naming it")
	closeRun(ctl1, run1.ID)
	run2 := handCampaign(t, root)
	run2.From = run1.ID
	ctl2, prior := fetch(run2)
	require.NotNil(t, prior, "run 2 leased the root with no prior capture: the history was gone before forget")
	assert.ErrorContains(t, forget(run1.ID), run2.ID, "forget while run 2 reads the lineage: want a refusal naming it")
	closeRun(ctl2, run2.ID)

	// A scheduler that cannot be reached: the first round fails there,
	// and nothing is dropped anywhere.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = session.Client{Token: session.DevToken}.ForgetHistory(ctx, []string{sched.addr, dead}, run1.ID)
	cancel()
	assert.ErrorContains(t, err, dead, "forget with a scheduler down: want an error naming it")
	kept, _ := store.History(run1.ID, seen.KeyOf(root))
	assert.NotNil(t, kept, "the root's history was dropped though a scheduler could not be asked")

	require.NoError(t, forget(run1.ID), "forget once no run is open")
	left, err := store.History(run1.ID, seen.KeyOf(root))
	assert.NoError(t, err, "the root's history after forget")
	assert.Nil(t, left, "the root's history after forget: %d bytes, want none", len(left))
	run3 := handCampaign(t, root)
	run3.From = run1.ID
	_, prior3 := fetch(run3)
	assert.Nil(t, prior3, "run 3 leased the root with a prior after forget, want a full fetch")
	assert.Error(t, forget(""), "forget with no lineage: no error")
}

// holdHistory holds, while armed, the next write of a URL's history until
// released: a record in flight as its campaign closes.
type holdHistory struct {
	seen.Store
	armed   atomic.Bool
	held    chan struct{} // closed when a write is held
	release chan struct{}
}

func (s *holdHistory) SetHistory(lineage string, keys []seen.Key, values [][]byte) error {
	if s.armed.CompareAndSwap(true, false) {
		close(s.held)
		<-s.release
	}
	return s.Store.SetHistory(lineage, keys, values)
}

// A campaign closing while a record still writes its history is a user
// of its lineage until its actor stopped: forget refuses it meanwhile
// (it was out of the open campaigns, and the record wrote the history
// back after the drop), and forgets it once the close returned.
func TestForgetHistoryWaitsForAClosingCampaign(t *testing.T) {
	store := &holdHistory{Store: seen.NewMemory(), held: make(chan struct{}), release: make(chan struct{})}
	sched := startScheduler(t, frontier.DefaultServerConfig(), store)
	const root = "http://127.66.76.3:9/"
	cfg := handCampaign(t, root)
	ctl, f := seedHand(t, sched.addr, cfg)
	store.armed.Store(true)
	f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Capture: &page.Capture{Status: 200, Digest: "sha1:A"}})
		return true
	})
	<-store.held // the root's record is writing its history
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := ctl.CloseCampaign(ctx, cfg.ID, true)
		closed <- err
	}()
	forget := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return session.Client{Token: session.DevToken}.ForgetHistory(ctx, []string{sched.addr}, cfg.ID)
	}
	// The close is under way once the campaign is no longer open: its
	// stats say closed, or the refusal names it closing.
	var refusal error
	await.For(t, 10*time.Second, 20*time.Millisecond, "forget refused for a closing campaign", func() error {
		refusal = forget()
		if refusal == nil || !strings.Contains(refusal.Error(), "(closing)") {
			return fmt.Errorf("forget: %v", refusal)
		}
		return nil
	})
	t.Logf("while the record was held: %v", refusal)
	close(store.release)
	require.NoError(t, <-closed)
	require.NoError(t, forget(), "forget after the close")
	back, _ := store.History(cfg.ID, seen.KeyOf(root))
	assert.Nil(t, back, "the root's history is back after forget: %d bytes", len(back))
}

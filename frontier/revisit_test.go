package frontier_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stepClock is a scheduler clock a test moves by hand.
type stepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// clockedScheduler starts a scheduler on a memory store whose clock the
// test moves (from t0), releasing what is due every 20 ms.
func clockedScheduler(t *testing.T) (time.Time, *stepClock, *scheduler) {
	t0 := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)
	clock := &stepClock{t: t0}
	scfg := frontier.DefaultServerConfig()
	scfg.Clock, scfg.RevisitPoll = clock.Now, 20*time.Millisecond
	return t0, clock, startScheduler(t, scfg, seen.NewMemory())
}

// failUnschedule fails, while armed, the writes that only delete schedule
// entries: those of a release, after its publish was confirmed.
type failUnschedule struct {
	seen.Store
	armed atomic.Int32
}

func (s *failUnschedule) Schedule(c string, add, remove []seen.Due) error {
	if len(add) == 0 && len(remove) > 0 && s.armed.Add(-1) >= 0 {
		return errors.New("injected: the schedule entry could not be deleted")
	}
	return s.Store.Schedule(c, add, remove)
}

// A continuous campaign's URL comes back at its next-fetch time with the
// validator of its last capture. Copies of its message are acked as
// duplicates, never leased: those a release published again because it
// could not delete its entries (here twice, while the URL's lease is
// out), and one that comes after the fetch was recorded (a release that
// died between its publish and its delete). Its next fetch is further
// off, the page having been unchanged.
func TestRevisitCopiesAreNotFetched(t *testing.T) {
	clock := &stepClock{t: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
	scfg := frontier.DefaultServerConfig()
	scfg.Clock, scfg.RevisitPoll = clock.Now, 20*time.Millisecond
	store := &failUnschedule{Store: seen.NewMemory()}
	sched := startScheduler(t, scfg, store)
	const root = "http://127.66.77.1:9/"
	cfg := handCampaign(t, root)
	cfg.Revisit = []campaign.RevisitRule{{Min: time.Hour, Max: 24 * time.Hour, Factor: 2}}
	ctl, f := seedHand(t, sched.addr, cfg)

	capture := &page.Capture{Status: 200, ETag: `"a"`, Digest: "sha1:A", Date: clock.Now()}
	f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Capture: capture, MIME: "text/html"})
		return true
	})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the root scheduled an hour on", func(st session.Stats) bool {
		return st.Continuous && st.Scheduled == 1 && st.NextDue.Equal(clock.Now().Add(time.Hour))
	})

	store.armed.Store(2)
	clock.advance(time.Hour)
	due := clock.Now()
	var lease session.Lease
	f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool { lease = l; return true })
	if assert.NotNil(t, lease.Prior, "the revisit was leased with no prior, want the last capture's validator") {
		assert.Equal(t, `"a"`, lease.Prior.ETag, "the revisit was leased with prior %+v, want the last capture's validator", lease.Prior)
	}
	waitStats(t, ctl, cfg.ID, 10*time.Second, "three releases of the root, two of them duplicates, two failed", func(st session.Stats) bool {
		return st.Revisited == 3 && st.Duplicates == 2 && st.ReleaseErrors == 2
	})
	f.report(t, session.Outcome{LeaseID: lease.ID, Stored: true, Status: 304, Capture: lease.Prior, Unchanged: page.RevisitNotModified})
	// Unchanged: twice the interval.
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the root scheduled two hours on", func(st session.Stats) bool {
		return st.Unchanged == 1 && st.Scheduled == 1 && st.NextDue.Equal(clock.Now().Add(2*time.Hour))
	})

	require.NoError(t, frontier.PublishRevisit(sched.srv, shardQueue(cfg, root), root, due))
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "a late copy acked as a duplicate", func(st session.Stats) bool {
		return st.Duplicates == 3
	})
	for _, l := range readLeases(t, f, 2*time.Second) {
		assert.Failf(t, "leased again", "leased again: %s", l.URL)
	}
	t.Logf("%d releases, %d duplicates, %d fetched", st.Revisited, st.Duplicates, st.Fetched)
}

// A sitemap that lists a URL the campaign fetched with a <lastmod> after
// that fetch brings its next fetch forward, to the rule's minimum after
// the last fetch (four times that far off before: the page had been
// unchanged).
func TestSitemapLastmodBringsARevisitForward(t *testing.T) {
	t0, clock, sched := clockedScheduler(t)
	const sitemap, pageURL = "http://127.66.77.2:9/sitemap.xml", "http://127.66.77.2:9/page"
	cfg := handCampaign(t, sitemap)
	cfg.Revisit = []campaign.RevisitRule{{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, Factor: 4}}
	cfg.PerHostConcurrency = 2 // both out at once at t0+10m
	_, f := bumpBySitemap(t, t0, clock, sched, cfg, sitemap, pageURL)
	for _, l := range readLeases(t, f, time.Second) {
		assert.Failf(t, "leased before its time", "%s leased before its time", l.URL)
	}
	clock.advance(5 * time.Minute)
	f.pages(t, 1, time.Minute, nil, func(l session.Lease) bool {
		assert.Equal(t, pageURL, l.URL, "leased, want the page brought forward")
		return true
	})
}

// A rule with depth 0 fits the seeds alone: a news crawl's front page
// comes back every 10 minutes, the article it links to (depth 1) only
// after the catch-all rule's hour.
func TestRevisitRuleByDepth(t *testing.T) {
	t0, clock, sched := clockedScheduler(t)
	const front, article = "http://127.66.77.3:9/", "http://127.66.77.3:9/article"
	cfg := handCampaign(t, front)
	cfg.Revisit = []campaign.RevisitRule{{Depth: new(0), Min: 10 * time.Minute}, {Min: time.Hour}}
	ctl, f := seedHand(t, sched.addr, cfg)
	capture := &page.Capture{Status: 200, ETag: `"a"`, Digest: "sha1:A", Date: clock.Now()}
	leased := map[string]int{}
	f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool {
		leased[l.URL]++
		o := session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Capture: capture, MIME: "text/html"}
		if l.URL == front {
			o.Links = []urlrule.Link{{URL: article}}
		}
		f.report(t, o)
		return len(leased) == 2
	})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "both scheduled, the front page first at t0+10m", func(st session.Stats) bool {
		return st.Scheduled == 2 && st.NextDue.Equal(t0.Add(10*time.Minute))
	})
	// Five rounds of 10 minutes: the front page each time, the article not.
	for round := 1; round <= 5; round++ {
		clock.advance(10 * time.Minute)
		f.pages(t, 1, time.Minute, nil, func(l session.Lease) bool {
			leased[l.URL]++
			f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 304, Capture: l.Prior, Unchanged: page.RevisitNotModified})
			return true
		})
		waitStats(t, ctl, cfg.ID, 10*time.Second, "the revisit recorded", func(st session.Stats) bool { return st.Unchanged == int64(round) })
	}
	assert.Equal(t, 6, leased[front], "fetched the front page %d times and the article %d times in 50 minutes, want 6 and 1", leased[front], leased[article])
	assert.Equal(t, 1, leased[article], "fetched the front page %d times and the article %d times in 50 minutes, want 6 and 1", leased[front], leased[article])
	// t0+60m: the article's hour is up too.
	clock.advance(10 * time.Minute)
	back := map[string]bool{}
	f.pages(t, 2, time.Minute, nil, func(l session.Lease) bool {
		back[l.URL] = true
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 304, Capture: l.Prior, Unchanged: page.RevisitNotModified})
		return len(back) == 2
	})
}

// A sitemap's lastmod moves a URL's entry, not its depth: a front page
// that is a seed (depth 0), listed in the campaign's sitemap (where a link
// is depth 1), is brought forward by the seeds' rule, and its entry keeps
// depth 0, so that the seeds' rule still fits it after.
func TestSitemapLastmodKeepsTheURLsDepth(t *testing.T) {
	t0, clock, sched := clockedScheduler(t)
	const sitemap, front = "http://127.66.77.4:9/sitemap.xml", "http://127.66.77.4:9/"
	cfg := handCampaign(t, sitemap, front)
	cfg.Revisit = []campaign.RevisitRule{{Depth: new(0), Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, Factor: 4}}
	cfg.PerHostConcurrency = 2
	ctl, f := bumpBySitemap(t, t0, clock, sched, cfg, sitemap, front)
	clock.advance(5 * time.Minute)
	f.pages(t, 1, time.Minute, nil, func(l session.Lease) bool {
		assert.Equal(t, front, l.URL, "leased, want the front page brought forward")
		// Unchanged again: the seeds' rule (its depth kept) multiplies
		// its 40 minutes by 4.
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 304, Capture: l.Prior, Unchanged: page.RevisitNotModified})
		return true
	})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the front page next at t0+20m+160m, the sitemap at t0+25m", func(st session.Stats) bool {
		return st.Unchanged == 2 && st.Scheduled == 2 && st.NextDue.Equal(t0.Add(25*time.Minute))
	})
}

// bumpBySitemap runs cfg (seeded with sitemap, its PerHostConcurrency 2)
// to the point where sitemap brought target forward: at t0 both are
// fetched (the sitemap listing target, without lastmod) and scheduled at
// t0+10m; then both come back, target unchanged (to t0+50m); at t0+15m
// the sitemap, changed, says target changed at t0+14m, and target is due
// at t0+20m. The clock is then at t0+15m.
func bumpBySitemap(t *testing.T, t0 time.Time, clock *stepClock, sched *scheduler, cfg campaign.Config, sitemap, target string) (*session.Control, *rawFetcher) {
	t.Helper()
	ctl, f := seedHand(t, sched.addr, cfg)
	capture := func(tag string) *page.Capture {
		return &page.Capture{Status: 200, ETag: `"` + tag + `"`, Digest: "sha1:" + tag, Date: clock.Now()}
	}
	leased := map[string]session.Lease{}
	f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool {
		leased[l.URL] = l
		o := session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Capture: capture("1"), MIME: "text/html"}
		if l.URL == sitemap {
			o.Links = []urlrule.Link{{URL: target}}
		}
		f.report(t, o)
		return len(leased) == 2
	})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "both scheduled at t0+10m", func(st session.Stats) bool {
		return st.Scheduled == 2 && st.NextDue.Equal(t0.Add(10*time.Minute))
	})
	clock.advance(10 * time.Minute)
	clear(leased)
	f.pages(t, 4, time.Minute, nil, func(l session.Lease) bool { leased[l.URL] = l; return len(leased) == 2 })
	tl := leased[target]
	f.report(t, session.Outcome{LeaseID: tl.ID, Stored: true, Status: 304, Capture: tl.Prior, Unchanged: page.RevisitNotModified})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the target recorded unchanged", func(st session.Stats) bool { return st.Unchanged == 1 })
	clock.advance(5 * time.Minute)
	f.report(t, session.Outcome{LeaseID: leased[sitemap].ID, Stored: true, Status: 200, Capture: capture("2"), MIME: "application/xml",
		Links: []urlrule.Link{{URL: target, LastMod: t0.Add(14 * time.Minute)}}})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the target brought forward to t0+20m", func(st session.Stats) bool {
		return st.Bumped == 1 && st.Scheduled == 2 && st.NextDue.Equal(t0.Add(20*time.Minute))
	})
	return ctl, f
}

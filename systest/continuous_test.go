package systest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/starter/cli"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// virtualClock runs rate times faster than the wall clock from base, for
// a test to live days of a continuous campaign in minutes. The scheduler
// schedules its revisits by it, and changingWeb changes its pages by it.
type virtualClock struct {
	start time.Time
	base  time.Time
	rate  float64
}

func newVirtualClock(rate float64) *virtualClock {
	return &virtualClock{start: time.Now(), base: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC), rate: rate}
}

func (c *virtualClock) Now() time.Time {
	return c.base.Add(time.Duration(float64(time.Since(c.start)) * c.rate))
}

// Virtual duration d in wall time.
func (c *virtualClock) Real(d time.Duration) time.Duration { return time.Duration(float64(d) / c.rate) }

// changingWeb is a site whose pages change on a virtual clock: /fast/N
// every 15 minutes, /daily/N every day at midnight, /static/N and / never,
// and /news once, at bumpAt, which its sitemap (named in robots.txt, and
// linked nowhere else) says with a <lastmod>. Each version has an ETag; a
// request that names it gets 304. It records every request: the server's
// own count.
type changingWeb struct {
	clock *virtualClock
	srv   *httptest.Server
	mu    sync.Mutex
	log   []webHit
	pages int
	// bumpAt is when /news changes (virtual), a quarter into the run.
	bumpAt time.Time
}

type webHit struct {
	path        string
	at          time.Time // virtual
	status      int
	version     int64
	conditional bool
}

const changingPages = 4

func startChangingWeb(t *testing.T, clock *virtualClock) *changingWeb {
	w := &changingWeb{clock: clock, pages: changingPages}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	return w
}

func (w *changingWeb) paths() []string {
	out := []string{"/"}
	for _, class := range []string{"fast", "daily", "static"} {
		for i := range w.pages {
			out = append(out, fmt.Sprintf("/%s/%d", class, i))
		}
	}
	return out
}

// version is a page's version at virtual time at.
func (w *changingWeb) version(path string, at time.Time) int64 {
	since := at.Sub(w.clock.base)
	switch {
	case strings.HasPrefix(path, "/fast/"):
		return int64(since / (15 * time.Minute))
	case strings.HasPrefix(path, "/daily/"):
		return int64(since / (24 * time.Hour))
	case path == "/news", path == "/sitemap.xml":
		if !at.Before(w.bumpAt) {
			return 1
		}
	}
	return 0
}

// sitemap is /sitemap.xml at version v: /news, with its lastmod.
func (w *changingWeb) sitemap(v int64) string {
	lastmod := w.clock.base
	if v > 0 {
		lastmod = w.bumpAt
	}
	return fmt.Sprintf(`<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>%s/news</loc><lastmod>%s</lastmod></url></urlset>`,
		w.srv.URL, lastmod.Format(time.RFC3339))
}

func (w *changingWeb) serve(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		fmt.Fprintf(rw, "User-agent: *\nAllow: /\nSitemap: %s/sitemap.xml\n", w.srv.URL)
		return
	}
	known := r.URL.Path == "/" || r.URL.Path == "/news" || r.URL.Path == "/sitemap.xml"
	for _, p := range w.paths() {
		known = known || p == r.URL.Path
	}
	if !known {
		http.NotFound(rw, r)
		return
	}
	now := w.clock.Now()
	v := w.version(r.URL.Path, now)
	etag := fmt.Sprintf(`"v%d"`, v)
	hit := webHit{path: r.URL.Path, at: now, version: v, conditional: r.Header.Get("If-None-Match") != ""}
	rw.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		hit.status = http.StatusNotModified
		w.record(hit)
		rw.WriteHeader(http.StatusNotModified)
		return
	}
	hit.status = http.StatusOK
	w.record(hit)
	if r.URL.Path == "/sitemap.xml" {
		rw.Header().Set("Content-Type", "application/xml")
		rw.Write([]byte(w.sitemap(v)))
		return
	}
	rw.Header().Set("Content-Type", "text/html")
	var b strings.Builder
	fmt.Fprintf(&b, "<html><body><h1>%s version %d</h1>", r.URL.Path, v)
	if r.URL.Path == "/" {
		for _, p := range w.paths()[1:] {
			fmt.Fprintf(&b, `<a href="%s">%s</a> `, p, p)
		}
	}
	b.WriteString("</body></html>")
	rw.Write([]byte(b.String()))
}

func (w *changingWeb) record(h webHit) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.log = append(w.log, h)
}

func (w *changingWeb) hits() []webHit {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]webHit(nil), w.log...)
}

// TestContinuousCampaign: a continuous campaign on a site whose pages
// change every 15 minutes, daily or never lives a day on a virtual clock
// (a virtual day in a minute of wall time). By the server's count:
// at least 90% of the 15-minute versions were captured, each daily
// change within 2 days, the pages that never change were fetched no more
// often than the rule's growing intervals allow, every fetch after a
// page's first carried its validator, a pause of 72 virtual minutes saw
// no request and the pages came back after the resume, and the campaign
// kept running with its frontier drained between revisits until it was
// stopped, its schedule shown by `starter status`.
func TestContinuousCampaign(t *testing.T) {
	testenv.Slow(t)
	runContinuous(t, 1, 24*60) // a virtual day in a minute
}

// TestContinuousCampaignSevenDays is TestContinuousCampaign over seven
// virtual days, a day in 45 s: the daily changes, and the pages that never
// change reaching long intervals.
func TestContinuousCampaignSevenDays(t *testing.T) {
	testenv.Long(t)
	runContinuous(t, 7, 24*60*60/45)
}

func runContinuous(t *testing.T, days int, rate float64) {
	clock := newVirtualClock(rate)
	web := startChangingWeb(t, clock)
	sv := startServices(t)
	scfg := frontier.DefaultServerConfig()
	scfg.Clock, scfg.RevisitPoll = clock.Now, 20*time.Millisecond
	s := withWorkers(t, &stack{services: sv, sched: nodetest.StartScheduler(t, node.SchedulerConfig{
		SeenPath: filepath.Join(t.TempDir(), "seen"), Server: scfg})})

	sitemap := campaign.RevisitRule{Match: `/sitemap\.xml$`, Min: 10 * time.Minute, Max: 30 * time.Minute, Factor: 2}
	fast := campaign.RevisitRule{Match: "/fast/", Min: 5 * time.Minute, Max: 10 * time.Minute, Factor: 2}
	rest := campaign.RevisitRule{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, Factor: 4}
	cfg := campaign.Config{
		ID: fmt.Sprintf("continuous-%d", time.Now().UnixNano()%1e9), Seeds: []string{web.srv.URL + "/"},
		Fetchers: 2, AllowPrivate: true, PerHostDelay: new(time.Millisecond), PerHostConcurrency: 2,
		Sinks: []string{"kafka://" + s.kafka.Addr() + "/" + s.topic}, Revisit: []campaign.RevisitRule{sitemap, fast, rest},
		Sitemaps: true,
	}
	c := s.temporal.Client()
	clock.start, clock.base = time.Now(), clock.Now().Truncate(24*time.Hour)
	web.bumpAt = clock.base.Add(time.Duration(days) * 6 * time.Hour)
	run := ctStartCampaign(t, c, cfg)
	end := clock.base.Add(time.Duration(days) * 24 * time.Hour)

	// Half-way through, the schedule is what `starter status` shows.
	time.Sleep(clock.Real(time.Duration(days) * 12 * time.Hour))
	checkScheduleShown(t, s, cfg.ID, len(web.paths())+2) // and /news, /sitemap.xml
	// Three quarters in, a pause of 72 virtual minutes: nothing fetched.
	time.Sleep(time.Until(clock.start.Add(clock.Real(time.Duration(days) * 18 * time.Hour))))
	p := pauseContinuous(t, s, cfg.ID, web)
	time.Sleep(time.Until(clock.start.Add(clock.Real(end.Sub(clock.base)))))

	require.NoError(t, c.SignalWorkflow(context.Background(), cfg.ID, "", workflows.SignalStop, workflows.StopSignal{Reason: "lived its days"}))
	st := ctResult(t, run, 2*time.Minute)
	assert.Equal(t, campaign.StateStopped, st.State, "campaign ended (%s), want stopped: a continuous campaign runs until stopped", st.Reason)
	checkContinuousHits(t, web, end, rest, p)
}

// pause is when a pause asked (virtual), and when the resume came.
type pause struct{ asked, resumed time.Time }

// pauseContinuous pauses the campaign, waits for its fetchers to be gone
// from the scheduler, checks that the server sees no request for 72
// virtual minutes, and resumes it.
func pauseContinuous(t *testing.T, s *stack, id string, web *changingWeb) pause {
	t.Helper()
	c := s.temporal.Client()
	p := pause{asked: web.clock.Now()}
	require.NoError(t, c.SignalWorkflow(context.Background(), id, "", workflows.SignalPause, workflows.PauseSignal{Reason: "a pause"}))
	await.For(t, pauseTakesEffectWithin, 20*time.Millisecond, "no fetcher session left", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		st, err := session.Client{Token: session.DevToken}.CampaignStats(ctx, []string{s.sched.Addr()}, id)
		if err == nil && (st.Sessions != 0 || st.InFlight != 0) {
			err = fmt.Errorf("%d sessions, %d in flight", st.Sessions, st.InFlight)
		}
		return err
	})
	paused, before := web.clock.Now(), len(web.hits())
	time.Sleep(web.clock.Real(72 * time.Minute))
	assert.Zero(t, len(web.hits())-before, "requests while paused")
	p.resumed = web.clock.Now()
	t.Logf("paused at %s (asked %s before), resumed %s later", paused.Sub(web.clock.base), paused.Sub(p.asked).Round(time.Second), p.resumed.Sub(paused).Round(time.Minute))
	require.NoError(t, c.SignalWorkflow(context.Background(), id, "", workflows.SignalResume, workflows.ResumeSignal{}))
	return p
}

// checkScheduleShown: `starter status --json` shows the campaign running,
// every page of the site scheduled (or on its way), and a next due time.
func checkScheduleShown(t *testing.T, s *stack, id string, pages int) {
	t.Helper()
	await.For(t, 30*time.Second, 100*time.Millisecond, "the schedule in starter status", func() error {
		var out, errb bytes.Buffer
		app := &cli.App{
			Env: cli.Env{Env: envconf.Env{TemporalAddress: s.temporal.Address(), TemporalNamespace: s.temporal.Namespace(), Schedulers: []string{s.sched.Addr()}, Token: session.DevToken}},
			Out: &out, Err: &errb, Dial: cli.DialTemporal, Stats: sessiontest.CampaignStats,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if code := app.Run(ctx, []string{"status", id, "--json"}); code != 0 {
			return fmt.Errorf("starter status: exit %d: %s", code, errb.String())
		}
		var v cli.View
		if err := json.Unmarshal(out.Bytes(), &v); err != nil {
			return err
		}
		st := v.Scheduler
		switch {
		case v.State != campaign.StateRunning:
			return fmt.Errorf("state %s", v.State)
		case st == nil || !st.Continuous:
			return fmt.Errorf("no continuous schedule in %+v", st)
		case st.Scheduled < int64(pages)-4 || st.Scheduled > int64(pages) || st.NextDue.IsZero() || st.Revisited == 0:
			return fmt.Errorf("%d scheduled of %d pages, next due %v, %d released", st.Scheduled, pages, st.NextDue, st.Revisited)
		}
		t.Logf("status: %d scheduled, next due %s, %d released, %d fetched", st.Scheduled, st.NextDue.Format(time.DateTime), st.Revisited, st.Fetched)
		return nil
	})
}

// checkContinuousHits checks the server's log against the revisit rules.
func checkContinuousHits(t *testing.T, web *changingWeb, end time.Time, rest campaign.RevisitRule, p pause) {
	t.Helper()
	byPath := map[string][]webHit{}
	for _, h := range web.hits() {
		byPath[h.path] = append(byPath[h.path], h)
	}
	begin := web.clock.base
	checkBumped(t, web, byPath["/news"])
	for _, path := range web.paths() {
		hs := byPath[path]
		if !assert.NotEmpty(t, hs, "%s: never fetched", path) {
			continue
		}
		for i, h := range hs {
			if i > 0 {
				assert.True(t, h.conditional, "%s: fetch %d at %s carried no validator", path, i+1, h.at.Format(time.DateTime))
			}
		}
		switch {
		case strings.HasPrefix(path, "/fast/"):
			checkFastVersions(t, path, hs, begin, end, p)
		case strings.HasPrefix(path, "/daily/"):
			checkDailyChanges(t, path, hs, begin, end)
		default:
			most := fetchesAtMost(rest, end.Sub(hs[0].at))
			t.Logf("%s: %d fetches (at most %d)", path, len(hs), most)
			assert.LessOrEqual(t, len(hs), most, "%s never changes: times fetched, against what the rule's intervals allow", path)
		}
	}
	t.Logf("%d requests over %s of virtual time", len(web.hits()), end.Sub(begin))
}

// checkBumped: /news, which never changes but once (it would come back
// at the growing intervals of the rule for the rest), was fetched in its
// new version within an hour of the change: its sitemap, fetched at least
// every 30 minutes, gave a lastmod after its last fetch, and the campaign
// fetched it again within the rule's minimum (10 minutes) of that.
func checkBumped(t *testing.T, web *changingWeb, hs []webHit) {
	t.Helper()
	var at []string
	for _, h := range hs {
		at = append(at, h.at.Sub(web.clock.base).Round(time.Minute).String())
		if h.version == 1 {
			t.Logf("/news: fetches at %v; changed at %s, fetched %s after", at, web.bumpAt.Sub(web.clock.base), h.at.Sub(web.bumpAt).Round(time.Second))
			late := h.at.Sub(web.bumpAt)
			assert.LessOrEqual(t, late, time.Hour, "/news changed at %s and its sitemap said so; fetched %s after", web.bumpAt.Format(time.DateTime), late)
			return
		}
	}
	assert.Failf(t, "/news: its change never fetched", "/news: its change at %s never fetched (fetches at %v)", web.bumpAt.Format(time.DateTime), at)
}

// checkFastVersions: at least 90% of a 15-minute page's versions, from
// its first fetch to the end, were served in full (captured), leaving out
// those of the pause; and the page came back within 30 minutes of the
// resume.
func checkFastVersions(t *testing.T, path string, hs []webHit, begin, end time.Time, ps pause) {
	t.Helper()
	back := false
	for _, h := range hs {
		back = back || (!h.at.Before(ps.resumed) && h.at.Before(ps.resumed.Add(30*time.Minute)))
	}
	assert.True(t, back, "%s: not fetched within 30 minutes of the resume at %s", path, ps.resumed.Format(time.DateTime))
	inPause := func(v int64) bool {
		at := begin.Add(time.Duration(v) * 15 * time.Minute)
		return !at.Before(ps.asked.Add(-15*time.Minute)) && !at.After(ps.resumed.Add(15*time.Minute))
	}
	captured := map[int64]bool{}
	for _, h := range hs {
		if h.status == http.StatusOK {
			captured[h.version] = true
		}
	}
	first, last := hs[0].version, int64(end.Sub(begin)/(15*time.Minute))-1
	n, total := 0, 0
	for v := first; v <= last; v++ {
		if inPause(v) {
			continue
		}
		total++
		if captured[v] {
			n++
		}
	}
	t.Logf("%s: %d of %d versions captured (those of the pause left out), %d fetches", path, n, total, len(hs))
	assert.GreaterOrEqual(t, float64(n), 0.9*float64(total), "%s: %d of %d 15-minute versions captured, want at least 90%%", path, n, total)
}

// checkDailyChanges: each midnight's change was fetched within 2 days (or
// the run ended before then).
func checkDailyChanges(t *testing.T, p string, hs []webHit, begin, end time.Time) {
	t.Helper()
	t.Logf("%s: %d fetches", p, len(hs))
	for day := begin.Add(24 * time.Hour); day.Before(end); day = day.Add(24 * time.Hour) {
		deadline := day.Add(48 * time.Hour)
		if deadline.After(end) {
			continue
		}
		seen := false
		for _, h := range hs {
			seen = seen || (!h.at.Before(day) && !h.at.After(deadline))
		}
		assert.True(t, seen, "%s: the change of %s was not fetched within 2 days", p, day.Format(time.DateOnly))
	}
}

// fetchesAtMost is how many fetches a page that never changes gets within
// d under rule r: its first, then one per interval, each Factor times the
// one before (from Min, up to Max).
func fetchesAtMost(r campaign.RevisitRule, d time.Duration) int {
	n, at, iv := 1, time.Duration(0), time.Duration(0)
	for {
		iv = r.Next(iv, false)
		if at+iv > d {
			return n
		}
		at += iv
		n++
	}
}

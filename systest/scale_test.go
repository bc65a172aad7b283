package systest_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The scheduler and worker binaries as separate
// processes, a scheduler SIGKILLed mid-crawl, two schedulers sharing a
// campaign with three workers, and politeness measured on the server's side.

// scaleWeb is the test web of the process tests: 4 hosts of 150 pages.
func scaleWeb(t *testing.T, base byte) *testweb.Web {
	t.Helper()
	return webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 150, CrossHost: true, Base: base})
}

// kafkaCounts reads the topic back and counts the records of each URL.
func kafkaCounts(t *testing.T, s *services, want int) (map[string]int, int) {
	t.Helper()
	recs := readTopic(t, s.kafka.Addr(), s.topic, want)
	got := map[string]int{}
	for _, m := range recs {
		got[string(m.Key)]++
	}
	return got, len(recs)
}

// schedulerDownFor is how long TestSchedulerKilledMidCrawl leaves its
// scheduler dead, paced on purpose: the workers' sessions fail and retry
// meanwhile (their redial backoff starts at 100 ms), and the leases the
// dead scheduler granted are outcomes it will never hear of.
const schedulerDownFor = time.Second

// TestSchedulerKilledMidCrawl: the only scheduler is SIGKILLed once the web
// has served about 30% of its pages and started again on the same port with
// the same seen-set; the campaign completes, the server saw every page, and
// every page is in Kafka (duplicates allowed: at-least-once).
func TestSchedulerKilledMidCrawl(t *testing.T) {
	web := scaleWeb(t, 40)
	s := startServices(t)
	addr := freeAddr(t)
	seen := filepath.Join(t.TempDir(), "seen-0")
	sched := startSchedulerProc(t, addr, 0, 1, seen)
	startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())

	pages := web.Pages()
	cfg := s.newCampaign("kill", web, 4)
	cfg.PerHostDelay = new(2 * time.Millisecond)
	cfg.PerHostConcurrency = 2
	start := time.Now()
	wait := runCampaign(t, s.temporal.Client(), cfg, 4*time.Minute)

	killAt := len(pages) * 3 / 10
	await.For(t, 2*time.Minute, 2*time.Millisecond, "30% of the pages served", func() error {
		if n := web.Total(); n < killAt {
			return fmt.Errorf("the web served %d requests, waiting for %d", n, killAt)
		}
		return nil
	})
	sched.Kill()
	atKill := web.Total()
	t.Logf("scheduler SIGKILLed after %s, the web had served %d of %d pages (+robots)", time.Since(start).Round(time.Millisecond), atKill, len(pages))
	require.Less(t, atKill, len(pages), "the crawl was over (%d requests) before the kill: nothing tested", atKill)
	time.Sleep(schedulerDownFor)
	startSchedulerProc(t, addr, 0, 1, seen)
	restarted := web.Total()

	st := wait()
	took := time.Since(start)
	t.Logf("campaign %s: %s in %s; %d requests before the restart, %d after; %d fetched as last reported",
		cfg.ID, st.State, took.Round(time.Millisecond), restarted, web.Total()-restarted, st.PagesFetched)
	assert.Greater(t, web.Total(), restarted, "no request after the restart: the crawl did not resume")
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}
	assert.Empty(t, web.DisallowedHits(), "disallowed URLs requested")
	dups := web.Duplicates()
	got, n := kafkaCounts(t, s, len(pages))
	extra := 0
	for _, u := range pages {
		c := got[u]
		assert.NotZero(t, c, "page %s: not in Kafka", u)
		if c > 1 {
			extra += c - 1
		}
	}
	t.Logf("after the kill: %d URLs fetched more than once on the server's side, %d duplicate records in Kafka (%d records for %d pages)",
		len(dups), extra, n, len(pages))
}

// TestTwoSchedulersThreeWorkers: two scheduler processes share the
// campaign's shards and three worker processes run six fetchers; without
// faults every page is fetched once and is once in Kafka.
func TestTwoSchedulersThreeWorkers(t *testing.T) {
	web := scaleWeb(t, 41)
	s := startServices(t)
	dir := t.TempDir()
	addrs := []string{freeAddr(t), freeAddr(t)}
	for i, a := range addrs {
		startSchedulerProc(t, a, i, len(addrs), filepath.Join(dir, fmt.Sprintf("seen-%d", i)))
	}
	for i := range 3 {
		startWorkerProc(t, fmt.Sprintf("worker-%d", i), addrs, s.temporal.Address(), s.kafka.Addr())
	}

	pages := web.Pages()
	cfg := s.newCampaign("scale", web, 6)
	cfg.PerHostDelay = new(2 * time.Millisecond)
	cfg.PerHostConcurrency = 2
	start := time.Now()
	st := runCampaign(t, s.temporal.Client(), cfg, 4*time.Minute)()
	took := time.Since(start)
	t.Logf("campaign %s: %s, %d pages in %s (%.0f pages/s, start to completion, 2 schedulers, 3 workers, 6 fetchers)",
		cfg.ID, st.State, len(pages), took.Round(time.Millisecond), float64(len(pages))/took.Seconds())

	checkFetchedOnce(t, web)
	got, n := kafkaCounts(t, s, len(pages))
	for _, u := range pages {
		assert.Equal(t, 1, got[u], "page %s: records in Kafka", u)
	}
	assert.Equal(t, len(pages), n, "records in Kafka")
}

// TestPolitenessSpacing: with PerHostDelay d and one request at a time per
// host, the starts of a host's requests (robots.txt included), as the
// server saw them, are at least d apart. A behaviour spec of politeness,
// not a speed assertion.
func TestPolitenessSpacing(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 20, CrossHost: true, Base: 42})
	s := startStack(t)
	const d = 150 * time.Millisecond
	cfg := s.newCampaign("polite", web, 3)
	cfg.PerHostDelay = new(d)
	cfg.PerHostConcurrency = 1
	runCampaign(t, s.temporal.Client(), cfg, 4*time.Minute)()
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}

	byHost := map[string][]testweb.Request{}
	for _, r := range web.Requests() {
		byHost[r.Host] = append(byHost[r.Host], r)
	}
	assert.Equal(t, len(web.Hosts()), len(byHost), "hosts with requests")
	smallest, smallestPages := time.Duration(-1), time.Duration(-1)
	for host, reqs := range byHost {
		slices.SortFunc(reqs, func(a, b testweb.Request) int { return a.Start.Compare(b.Start) })
		for i := 1; i < len(reqs); i++ {
			gap := reqs[i].Start.Sub(reqs[i-1].Start)
			if smallest < 0 || gap < smallest {
				smallest = gap
			}
			prevRobots := strings.HasSuffix(reqs[i-1].URL, "/robots.txt")
			if !prevRobots && (smallestPages < 0 || gap < smallestPages) {
				smallestPages = gap
			}
			assert.GreaterOrEqual(t, gap, d, "host %s: %s started %s after %s", host, reqs[i].URL, gap, reqs[i-1].URL)
		}
	}
	t.Logf("%d requests on %d hosts; smallest gap between a host's request starts: %s overall, %s not counting the request after robots.txt (delay %s)",
		len(web.Requests()), len(byHost), smallest, smallestPages, d)
}

package systest_test

// Two campaigns crawl one host through one scheduler: the test web's
// server sees every two requests to the host at least the host's delay
// apart, whichever campaign made them, and the campaigns take turns.

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTwoCampaignsShareAHostsPoliteness(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 12, NoExtras: true, Base: 144})
	s := startStack(t)
	const delay = time.Second
	var waits []func() // each campaign's wait for its end
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		cfg := s.newCampaign("shared", web, 1)
		cfg.PerHostDelay = new(delay)
		cfg.UserAgent = ua
		w := runCampaign(t, s.temporal.Client(), cfg, 3*time.Minute)
		waits = append(waits, func() { w() })
	}
	for _, w := range waits {
		w()
	}
	reqs, least, n := checkSharedClock(t, web, delay, "the host's")
	t.Logf("%d requests, the smallest gap %s; first half by campaign: %v", len(reqs), least.Round(time.Millisecond), n)
}

// The shared clock outlives its scheduler: SIGKILLed right after a
// request to the host, with both campaigns' leases out, and started again
// at once on its seen store, it spaces its first start a delay after the
// last one before the kill (its clocks died with it), and the server sees
// every two requests at least the delay apart to the end.
func TestSharedClockSurvivesSchedulerKill(t *testing.T) {
	testenv.Long(t)
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 8, NoExtras: true, Base: 148})
	s := startServices(t)
	addr := freeAddr(t)
	seenPath := filepath.Join(t.TempDir(), "seen-0")
	sched := startSchedulerProc(t, addr, 0, 1, seenPath)
	startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())
	// The delay is longer than a restart takes, so that a scheduler that
	// forgot the last start would give the next one too soon.
	const delay = 3 * time.Second
	var waits []func()
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		cfg := s.newCampaign("shared-kill", web, 1)
		cfg.PerHostDelay = new(delay)
		cfg.UserAgent = ua
		w := runCampaign(t, s.temporal.Client(), cfg, 4*time.Minute)
		waits = append(waits, func() { w() })
	}
	awaitRequests(t, web, 6)
	sched.Kill()
	atKill := web.Requests()
	startSchedulerProc(t, addr, 0, 1, seenPath)
	require.Less(t, len(atKill), 2*len(web.Pages()), "the crawl was over (%d requests) before the kill: nothing tested", len(atKill))
	for _, w := range waits {
		w()
	}
	reqs, least, _ := checkSharedClock(t, web, delay, "the host's")
	last := slices.MaxFunc(atKill, func(a, b testweb.Request) int { return a.Start.Compare(b.Start) })
	i := slices.IndexFunc(reqs, func(r testweb.Request) bool { return r.Start.After(last.Start) })
	require.GreaterOrEqual(t, i, 0, "no request after the kill")
	t.Logf("killed after request %d of %d; the first after it came %s later; the smallest gap %s",
		len(atKill), len(reqs), reqs[i].Start.Sub(last.Start).Round(time.Millisecond), least.Round(time.Millisecond))
}

// checkSharedClock: the server saw every page from each of the campaigns
// drover-test-a and drover-test-b, every two requests at least delay
// apart (whose is named in the message, "the host's"), and each campaign
// made at least 40% of the first half of the requests, while both crawl.
// It returns the requests in order, the smallest gap and the first half's
// requests by campaign.
func checkSharedClock(t *testing.T, web *testweb.Web, delay time.Duration, whose string) ([]testweb.Request, time.Duration, map[string]int) {
	t.Helper()
	reqs := web.Requests()
	slices.SortFunc(reqs, func(a, b testweb.Request) int { return a.Start.Compare(b.Start) })
	require.GreaterOrEqual(t, len(reqs), 2*len(web.Pages()), "requests; want every page from each campaign")
	least := time.Hour
	for i := 1; i < len(reqs); i++ {
		gap := reqs[i].Start.Sub(reqs[i-1].Start)
		least = min(least, gap)
		assert.GreaterOrEqual(t, gap, delay, "%s (%s) and %s (%s) %s apart at the server; %s delay is %s",
			reqs[i-1].URL, reqs[i-1].UA, reqs[i].URL, reqs[i].UA, gap.Round(time.Millisecond), whose, delay)
	}
	half := reqs[:len(reqs)/2]
	n := map[string]int{}
	for _, r := range half {
		n[r.UA]++
	}
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		share := float64(n[ua]) / float64(len(half))
		assert.GreaterOrEqual(t, share, 0.4, "campaign %s made %d of the first %d requests (%.0f%%): the other went ahead", ua, n[ua], len(half), 100*share)
	}
	return reqs, least, n
}

// Two campaigns crawl one host with no delay and a per-host concurrency
// of 1 each, through one scheduler: the host's concurrency is shared as
// its delay is, so the server never has two requests at once, and the
// campaigns take turns while both crawl.
func TestTwoCampaignsShareAHostsConcurrency(t *testing.T) {
	const pages = 20
	web := startDomainWeb(t, 1, pages, 50*time.Millisecond)
	sv := startServices(t)
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{Server: frontier.DefaultServerConfig(), SeenPath: filepath.Join(t.TempDir(), "seen")})
	startIPWorker(t, sv, []string{sched.Addr()}, "conc-worker", 0)
	var waits []func() workflows.Status
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		cfg := campaign.Config{ID: fmt.Sprintf("sharedconc-%d", rand.IntN(1e9)), Seeds: web.seeds(), Fetchers: 2, AllowPrivate: true,
			PerHostDelay: new(time.Duration(0)), PerHostConcurrency: 1, UserAgent: ua, Sinks: []string{"kafka://" + sv.kafka.Addr() + "/" + sv.topic}}
		waits = append(waits, runCampaign(t, sv.temporal.Client(), cfg, 3*time.Minute))
	}
	for _, w := range waits {
		w()
	}
	checkEveryPage(t, web, 2)
	web.mu.Lock()
	defer web.mu.Unlock()
	assert.Equal(t, 1, web.most, "requests at once at the server; two campaigns at a per-host concurrency of 1 share the host's")
	// While both crawl (the first half of the requests), each campaign
	// gets at least 40% of them.
	half := map[string]int{}
	for _, ua := range web.agents[:len(web.agents)/2] {
		half[ua]++
	}
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		n := half[ua]
		assert.GreaterOrEqual(t, 10*n, 4*(len(web.agents)/2), "campaign %s made %d of the first %d requests, want at least 40%%", ua, n, len(web.agents)/2)
	}
	t.Logf("%d requests; at most %d at once; first half by campaign %v", len(web.agents), web.most, half)
}

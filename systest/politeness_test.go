package systest_test

// Politeness steered while a crawl runs, by the server's own clock: a host
// rule sent mid-crawl spaces the host's requests from the next lease on,
// and a campaign's delay_factor follows a server that slows down.

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLiveHostRuleMidCrawl(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 30, CrossHost: true, Base: 146})
	s := startStack(t)
	cfg := s.newCampaign("hostrule", web, 2)
	cfg.PerHostDelay = new(5 * time.Millisecond)
	wait := runCampaign(t, s.temporal.Client(), cfg, 4*time.Minute)
	target := web.Hosts()[0]
	name, _, _ := cutPort(target)
	awaitRequests(t, web, 20)
	const delay = 250 * time.Millisecond
	sendRules(t, s.temporal.Client(), cfg.ID, workflows.RulesRequest{Host: &campaign.HostRule{Host: name, Delay: new(delay)}})
	returned := time.Now()
	wait()
	n := checkHostGaps(t, web, target, returned, delay)
	t.Logf("%d requests to %s after the rule, each %s or more apart", n, target, delay)
}

// checkHostGaps: the requests to target that started after the rule
// returned, at least 5 of them, are at least delay apart by the server's
// clock, but for the first two (a lease granted before the rule); it
// returns how many there were.
func checkHostGaps(t *testing.T, web *testweb.Web, target string, returned time.Time, delay time.Duration) int {
	t.Helper()
	var after []time.Time
	for _, r := range web.Requests() {
		if r.Host == target && r.Start.After(returned) {
			after = append(after, r.Start)
		}
	}
	sort.Slice(after, func(i, j int) bool { return after[i].Before(after[j]) })
	require.GreaterOrEqual(t, len(after), 5, "requests to %s after the rule: the crawl of it was over, nothing tested", target)
	for i := 2; i < len(after); i++ {
		gap := after[i].Sub(after[i-1])
		assert.GreaterOrEqual(t, gap, delay, "requests %d and %d to %s %s apart at the server, after a rule of %s", i-1, i, target, gap.Round(time.Millisecond), delay)
	}
	return len(after)
}

func cutPort(hostport string) (host, port string, ok bool) {
	for i := len(hostport) - 1; i >= 0; i-- {
		if hostport[i] == ':' {
			return hostport[:i], hostport[i+1:], true
		}
	}
	return hostport, "", false
}

// A server that answers in 50 ms, then in 2 s: at delay_factor 2 the gaps
// between its request starts reach 4 s within 5 requests of the slowdown.
func TestAdaptiveDelayFollowsASlowServer(t *testing.T) {
	const fastFor = 4
	srv := startSlowingServer(t, fastFor)
	s := startStack(t)
	cfg := srv.campaign(s.services, fastFor+5)
	runCampaign(t, s.temporal.Client(), cfg, 4*time.Minute)()
	gaps := srv.gaps()
	t.Logf("gaps between request starts: %v", gaps)
	i := reachedAt(gaps, fastFor, 2*slowAnswer)
	assert.True(t, i >= 0 && i-fastFor < 5, "the gaps did not reach %s within 5 requests of the slowdown: %v", 2*slowAnswer, gaps)
}

// The adaptive delay after a SIGKILL of the scheduler, once the gaps
// had grown to 4 s and with a slow request under way: the scheduler
// started again on its seen store has lost the server's response time
// (it is kept in memory), so its first start comes at the campaign's
// delay, and the gaps reach 4 s again within 5 requests of it.
func TestAdaptiveDelaySurvivesSchedulerKill(t *testing.T) {
	testenv.Long(t)
	const fastFor = 3
	srv := startSlowingServer(t, fastFor)
	s := startServices(t)
	addr := freeAddr(t)
	seenPath := filepath.Join(t.TempDir(), "seen-0")
	sched := startSchedulerProc(t, addr, 0, 1, seenPath)
	startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())
	cfg := srv.campaign(s, 0)
	wait := runCampaign(t, s.temporal.Client(), cfg, 6*time.Minute)
	await.For(t, 2*time.Minute, 20*time.Millisecond, "the gaps grown to 4 s and a slow request under way", func() error {
		gaps, inflight := srv.gaps(), srv.inflight.Load()
		if reachedAt(gaps, fastFor, 2*slowAnswer) < 0 || inflight == 0 {
			return fmt.Errorf("gaps %v, %d requests under way", gaps, inflight)
		}
		return nil
	})
	before, inflight := len(srv.gaps())+1, srv.inflight.Load()
	sched.Kill()
	startSchedulerProc(t, addr, 0, 1, seenPath)
	st := wait()
	gaps := srv.gaps()
	t.Logf("killed after %d requests, %d under way; gaps between request starts: %v; %s", before, inflight, gaps, st.State)
	require.GreaterOrEqual(t, len(gaps), before+5, "%d requests after the kill: too few to tell", len(gaps)+1-before)
	// gaps[before-1] is the gap to the first start after the kill.
	assert.Equal(t, before, reachedAt(gaps, before, 2*slowAnswer), "after the restart the gap after the first request is not %s: %v", 2*slowAnswer, gaps[before-1:])
}

// slowAnswer is how long a slowingServer takes once it slowed down.
const slowAnswer = 2 * time.Second

// slowingServer answers its first fastFor requests in 50 ms, the others
// in slowAnswer: a page at / and at /p/0../p/11, each linking to all of
// /p/N, and no robots.txt.
type slowingServer struct {
	url      string
	mu       sync.Mutex
	starts   []time.Time
	inflight atomic.Int32
}

func startSlowingServer(t *testing.T, fastFor int) *slowingServer {
	s := &slowingServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.inflight.Add(1)
		defer s.inflight.Add(-1)
		s.mu.Lock()
		s.starts = append(s.starts, time.Now())
		n := len(s.starts)
		s.mu.Unlock()
		if n <= fastFor {
			time.Sleep(50 * time.Millisecond)
		} else {
			time.Sleep(slowAnswer)
		}
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><body>")
		for i := range 12 {
			fmt.Fprintf(w, `<a href="/p/%d">%d</a>`, i, i)
		}
		fmt.Fprint(w, "</body></html>")
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// campaign crawls the server at a 1 ms delay, delay_factor 2, into
// sv's Kafka; maxPages 0 crawls it all.
func (s *slowingServer) campaign(sv *services, maxPages int64) campaign.Config {
	return campaign.Config{ID: fmt.Sprintf("adaptive-%d", time.Now().UnixNano()), Seeds: []string{s.url + "/"}, Fetchers: 2,
		AllowPrivate: true, PerHostDelay: new(time.Millisecond), DelayFactor: 2, MaxPages: maxPages,
		Sinks: []string{"kafka://" + sv.kafka.Addr() + "/" + sv.topic}}
}

// gaps are the gaps between the server's request starts so far.
func (s *slowingServer) gaps() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(s.starts); i++ {
		gaps = append(gaps, s.starts[i].Sub(s.starts[i-1]).Round(time.Millisecond))
	}
	return gaps
}

// reachedAt is the index of the first of gaps, from from on, of at least
// want; -1 when none.
func reachedAt(gaps []time.Duration, from int, want time.Duration) int {
	for i := from; i < len(gaps); i++ {
		if gaps[i] >= want {
			return i
		}
	}
	return -1
}

// A host rule outlives a scheduler SIGKILLed right after it returned,
// while the crawl of the host is in full swing: the scheduler started
// again on the same seen store reads the rule back, and the server sees
// the host's requests at least the rule's delay apart until the end.
func TestLiveHostRuleSurvivesSchedulerKill(t *testing.T) {
	testenv.Long(t)
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 60, CrossHost: true, Base: 147})
	s := startServices(t)
	addr := freeAddr(t)
	seenPath := filepath.Join(t.TempDir(), "seen-0")
	sched := startSchedulerProc(t, addr, 0, 1, seenPath)
	startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())
	cfg := s.newCampaign("hostrule-kill", web, 2)
	cfg.PerHostDelay = new(5 * time.Millisecond)
	wait := runCampaign(t, s.temporal.Client(), cfg, 6*time.Minute)
	target := web.Hosts()[0]
	name, _, _ := cutPort(target)
	awaitRequests(t, web, 20)
	const delay = 250 * time.Millisecond
	sendRules(t, s.temporal.Client(), cfg.ID, workflows.RulesRequest{Host: &campaign.HostRule{Host: name, Delay: new(delay)}})
	returned := time.Now()
	sched.Kill()
	atKill := web.Total()
	startSchedulerProc(t, addr, 0, 1, seenPath)
	require.Less(t, atKill, len(web.Pages()), "the crawl was over (%d requests) before the kill: nothing tested", atKill)
	wait()
	n := checkHostGaps(t, web, target, returned, delay)
	t.Logf("killed at request %d of %d; %d requests to %s after the rule, each %s or more apart", atKill, len(web.Pages()), n, target, delay)
}

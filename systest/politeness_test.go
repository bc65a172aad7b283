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
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
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
	if len(after) < 5 {
		t.Fatalf("%d requests to %s after the rule: the crawl of it was over, nothing tested", len(after), target)
	}
	for i := 2; i < len(after); i++ {
		if gap := after[i].Sub(after[i-1]); gap < delay {
			t.Errorf("requests %d and %d to %s %s apart at the server, after a rule of %s", i-1, i, target, gap.Round(time.Millisecond), delay)
		}
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
	const fast, slow, fastFor = 50 * time.Millisecond, 2 * time.Second, 4
	var mu sync.Mutex
	var starts []time.Time
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		starts = append(starts, time.Now())
		n := len(starts)
		mu.Unlock()
		if n <= fastFor {
			time.Sleep(fast)
		} else {
			time.Sleep(slow)
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
	defer srv.Close()
	s := startStack(t)
	cfg := campaign.Config{ID: fmt.Sprintf("adaptive-%d", time.Now().UnixNano()), Seeds: []string{srv.URL + "/"}, Fetchers: 2,
		AllowPrivate: true, PerHostDelay: new(time.Millisecond), DelayFactor: 2, MaxPages: fastFor + 5,
		Sinks: []string{"kafka://" + s.kafka.Addr() + "/" + s.topic}}
	runCampaign(t, s.temporal.Client(), cfg, 4*time.Minute)()
	mu.Lock()
	defer mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(starts); i++ {
		gaps = append(gaps, starts[i].Sub(starts[i-1]).Round(time.Millisecond))
	}
	t.Logf("gaps between request starts: %v", gaps)
	reached := -1
	for i := fastFor; i < len(gaps); i++ {
		if gaps[i] >= 2*slow {
			reached = i
			break
		}
	}
	if reached < 0 || reached-fastFor >= 5 {
		t.Errorf("the gaps did not reach %s within 5 requests of the slowdown: %v", 2*slow, gaps)
	}
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
	if atKill >= len(web.Pages()) {
		t.Fatalf("the crawl was over (%d requests) before the kill: nothing tested", atKill)
	}
	wait()
	n := checkHostGaps(t, web, target, returned, delay)
	t.Logf("killed at request %d of %d; %d requests to %s after the rule, each %s or more apart", atKill, len(web.Pages()), n, target, delay)
}

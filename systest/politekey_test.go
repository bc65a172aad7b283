package systest_test

// Politeness keyed by registered domain or by a named group, by the
// server's own clock: eight host names of one domain, crawled through two
// schedulers, are one domain's worth of requests, one at a time and the
// delay apart; two campaigns naming one group share its delay.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// domainWeb serves the host names hN.drover.test (N < hosts) on one
// loopback listener, pages of them each, every page answered after
// latency; it records each request's start and end, and the most requests
// it ever had at once.
type domainWeb struct {
	srv            *httptest.Server
	port           string
	hosts, pages   int
	latency        time.Duration
	mu             sync.Mutex
	starts         []time.Time
	agents         []string       // the User-Agent of each of starts
	seen           map[string]int // host+path -> requests
	inflight, most int
}

func startDomainWeb(t *testing.T, hosts, pages int, latency time.Duration) *domainWeb {
	w := &domainWeb{hosts: hosts, pages: pages, latency: latency, seen: map[string]int{}}
	w.srv = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(w.srv.Close)
	_, w.port, _ = net.SplitHostPort(w.srv.Listener.Addr().String())
	return w
}

func (w *domainWeb) serve(rw http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.Host)
	w.mu.Lock()
	w.starts = append(w.starts, time.Now())
	w.agents = append(w.agents, r.UserAgent())
	w.seen[host+r.URL.Path]++
	w.inflight++
	w.most = max(w.most, w.inflight)
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.inflight--
		w.mu.Unlock()
	}()
	time.Sleep(w.latency)
	if r.URL.Path == "/robots.txt" {
		http.NotFound(rw, r)
		return
	}
	rw.Header().Set("Content-Type", "text/html")
	fmt.Fprint(rw, "<html><body>")
	for p := 1; p < w.pages; p++ {
		fmt.Fprintf(rw, `<a href="/p/%d">%d</a>`, p, p)
	}
	fmt.Fprint(rw, "</body></html>")
}

func (w *domainWeb) seeds() []string {
	var out []string
	for h := range w.hosts {
		out = append(out, fmt.Sprintf("http://h%d.drover.test:%s/", h, w.port))
	}
	return out
}

// lookup answers every name of drover.test with the listener's IP.
func (w *domainWeb) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	if !strings.HasSuffix(host, ".drover.test") {
		return nil, fmt.Errorf("%s: not a test name", host)
	}
	return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
}

func TestDomainKeyOneRequestAtATime(t *testing.T) {
	const delay = 300 * time.Millisecond
	web := crawlDomain(t, delay, 30*time.Millisecond)
	web.mu.Lock()
	defer web.mu.Unlock()
	assert.Equal(t, 1, web.most, "requests at once at the server; the domain's hosts share one clock")
	starts := slices.SortedFunc(slices.Values(web.starts), time.Time.Compare)
	least := time.Hour
	for i := 1; i < len(starts); i++ {
		least = min(least, starts[i].Sub(starts[i-1]))
	}
	assert.GreaterOrEqual(t, least, delay, "two requests to the domain %s apart at the server; its delay is %s", least.Round(time.Millisecond), delay)
	t.Logf("%d requests to %d hosts of drover.test; at most %d at once; smallest gap %s", len(starts), web.hosts, web.most, least.Round(time.Millisecond))
}

// Without a delay, a domain's hosts still have the campaign's per-host
// concurrency between them all: the server never has two requests at once.
func TestDomainKeyConcurrencyWithoutDelay(t *testing.T) {
	web := crawlDomain(t, 0, 100*time.Millisecond)
	web.mu.Lock()
	defer web.mu.Unlock()
	assert.Equal(t, 1, web.most, "requests at once at the server; a per-host concurrency of 1 holds for the domain's hosts together")
	t.Logf("%d requests to %d hosts of drover.test; at most %d at once", len(web.starts), web.hosts, web.most)
}

// crawlDomain crawls eight host names of drover.test, keyed by domain at
// delay, through two schedulers (each the owner of half the shards: keyed
// by host, the hosts would be spread over both) and four fetchers, with
// every answer taking latency; it checks that every page was requested
// and returns the web.
func crawlDomain(t *testing.T, delay, latency time.Duration) *domainWeb {
	const hosts, pages = 8, 4
	web := startDomainWeb(t, hosts, pages, latency)
	sv := startServices(t)
	var addrs []string
	for i := range 2 {
		c := frontier.DefaultServerConfig()
		c.Name, c.Index, c.Replicas = fmt.Sprintf("sched-%d", i), i, 2
		addrs = append(addrs, nodetest.StartScheduler(t, node.SchedulerConfig{Server: c, SeenPath: filepath.Join(t.TempDir(), "seen")}).Addr())
	}
	w, err := temporalnode.StartWorkers(sv.temporal.Client(), temporalnode.WorkerConfig{Identity: "domain-worker", Activities: &activities.Activities{
		Schedulers: addrs, Token: session.DevToken, KafkaBrokers: sv.kafka.Addr(), Identity: "domain-worker", Lookup: web.lookup,
	}})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	cfg := campaign.Config{ID: fmt.Sprintf("domainkey-%d", rand.IntN(1e9)), Seeds: web.seeds(), Fetchers: 4, AllowPrivate: true,
		PerHostDelay: new(delay), PolitenessKey: campaign.KeyDomain, Sinks: []string{"kafka://" + sv.kafka.Addr() + "/" + sv.topic}}
	runCampaign(t, sv.temporal.Client(), cfg, 4*time.Minute)()
	web.mu.Lock()
	defer web.mu.Unlock()
	for h := range hosts {
		for p := range pages {
			path := "/"
			if p > 0 {
				path = fmt.Sprintf("/p/%d", p)
			}
			assert.NotZero(t, web.seen[fmt.Sprintf("h%d.drover.test%s", h, path)], "h%d.drover.test%s never requested", h, path)
		}
	}
	return web
}

// Two campaigns name one group for the four hosts of a test web: the
// server sees every two requests to the group's hosts the delay apart,
// whichever campaign and host made them, and each campaign gets its
// turns while both crawl.
func TestGroupKeySharedByTwoCampaigns(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 5, NoExtras: true, Base: 148})
	s := startStack(t)
	const delay = 300 * time.Millisecond
	groups := map[string]string{}
	for _, h := range web.Hosts() {
		name, _, _ := cutPort(h)
		groups[name] = "testweb"
	}
	var waits []func() workflows.Status
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		cfg := s.newCampaign("group", web, 2)
		cfg.PerHostDelay = new(delay)
		cfg.UserAgent = ua
		cfg.PolitenessKey, cfg.PolitenessGroups = campaign.KeyGroup, groups
		waits = append(waits, runCampaign(t, s.temporal.Client(), cfg, 3*time.Minute))
	}
	for _, w := range waits {
		w()
	}
	reqs, least, n := checkSharedClock(t, web, delay, "the group's")
	t.Logf("%d requests to %d hosts of one group, the smallest gap %s; first half by campaign: %v", len(reqs), len(web.Hosts()), least.Round(time.Millisecond), n)
}

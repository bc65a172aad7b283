package node_test

// Politeness keyed by IP, by the server's own clock: eight host names on
// one address, held by two schedulers (a host's shard is a hash of its
// name), are one address's worth of requests: one at a time.

import (
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/session"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
)

func TestIPKeyOneRequestAtATimeOverTwoSchedulers(t *testing.T) {
	const delay = 300 * time.Millisecond
	web, seen := crawlByIP(t, delay, 30*time.Millisecond)
	web.mu.Lock()
	defer web.mu.Unlock()
	if web.most != 1 {
		t.Errorf("the server had %d requests at once; the hosts of one IP share one clock over both schedulers", web.most)
	}
	starts := slices.SortedFunc(slices.Values(web.starts), time.Time.Compare)
	least := time.Hour
	for i := 1; i < len(starts); i++ {
		least = min(least, starts[i].Sub(starts[i-1]))
	}
	if seen[0].asks+seen[1].asks == 0 {
		t.Error("no start was asked of the other scheduler: the IP's owner held every host")
	}
	t.Logf("%d requests to %d host names of 127.0.0.1; at most %d at once; smallest gap %s; hosts held and starts asked of the owner (scheduler 1) by scheduler: %+v",
		len(starts), web.hosts, web.most, least.Round(time.Millisecond), seen)
}

// schedSeen is what one scheduler's metrics showed of the campaign at
// most: the hosts it held and the starts it asked of another scheduler.
type schedSeen struct{ hosts, asks float64 }

// crawlByIP crawls eight host names that all resolve to 127.0.0.1 (the
// fetchers' lookup hook), keyed by IP at delay, through two schedulers
// that know each other, with every answer taking latency. Scheduler 1
// owns the IP's clock; the first fetcher session goes to scheduler 0,
// whose consumers then come first on the campaign's shards (its own
// half, then the rest, as a standby), so that it holds hosts and asks
// scheduler 1 for their starts. It checks that
// every page was requested, and returns the web and what each
// scheduler's metrics showed while it ran.
func crawlByIP(t *testing.T, delay, latency time.Duration) (*domainWeb, [2]schedSeen) {
	const hosts, pages = 8, 4
	web := startDomainWeb(t, hosts, pages, latency)
	sv := startServices(t)
	addrs := freeAddrs(t, 2)
	for frontier.IPOwner(addrs, "127.0.0.1") != addrs[1] {
		addrs = freeAddrs(t, 2)
	}
	var regs [2]*prometheus.Registry
	for i := range 2 {
		c := frontier.DefaultServerConfig()
		c.Name, c.Index, c.Replicas = fmt.Sprintf("ipsched-%d", i), i, 2
		c.Peers, c.Self = addrs, addrs[i]
		regs[i] = prometheus.NewRegistry()
		nodetest.StartScheduler(t, node.SchedulerConfig{Server: c, Listen: addrs[i], SeenPath: filepath.Join(t.TempDir(), "seen"), Metrics: regs[i]})
	}
	w, err := node.StartWorkers(sv.temporal.Client(), node.WorkerConfig{Identity: "ip-worker", Activities: &activities.Activities{
		Schedulers: addrs, Token: session.DevToken, KafkaBrokers: sv.kafka.Addr(), Identity: "ip-worker", Lookup: web.lookup,
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	cfg := campaign.Config{ID: fmt.Sprintf("ipkey-%d", rand.IntN(1e9)), Seeds: web.seeds(), Fetchers: 4, AllowPrivate: true,
		PerHostDelay: new(delay), PolitenessKey: campaign.KeyIP, Sinks: []string{"kafka://" + sv.kafka.Addr() + "/" + sv.topic}}
	wait := runCampaign(t, sv.temporal.Client(), cfg, 4*time.Minute)
	var seen [2]schedSeen
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for i, r := range regs {
				seen[i].hosts = max(seen[i].hosts, gathered(r, "drover_scheduler_hosts", cfg.ID))
				seen[i].asks = max(seen[i].asks, gathered(r, "drover_scheduler_remote_slot_asks_total", cfg.ID))
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	wait()
	close(stop)
	wg.Wait()
	web.mu.Lock()
	defer web.mu.Unlock()
	for h := range hosts {
		for p := range pages {
			path := "/"
			if p > 0 {
				path = fmt.Sprintf("/p/%d", p)
			}
			if web.seen[fmt.Sprintf("h%d.drover.test%s", h, path)] == 0 {
				t.Errorf("h%d.drover.test%s never requested", h, path)
			}
		}
	}
	return web, seen
}

// freeAddrs returns n loopback addresses with a port free a moment ago,
// for schedulers that must know one another's address before they start.
func freeAddrs(t *testing.T, n int) []string {
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ln.Addr().String())
		ln.Close()
	}
	return out
}

// gathered is the value of the series name of campaign in r (0 without).
func gathered(r *prometheus.Registry, name, campaign string) float64 {
	mfs, err := r.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "campaign" && l.GetValue() == campaign {
					if c := m.GetCounter(); c != nil {
						return c.GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

package systest_test

// Politeness keyed by IP, by the server's own clock: eight host names on
// one address, held by schedulers that are not the IP's owner (a host's
// shard is a hash of its name), are one address's worth of requests: one
// at a time, whichever campaign and scheduler made them.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
)

const ipHosts, ipPages = 8, 4

func TestIPKeyOneRequestAtATimeOverTwoSchedulers(t *testing.T) {
	const delay = 300 * time.Millisecond
	web := startDomainWeb(t, ipHosts, ipPages, 30*time.Millisecond)
	sv := startServices(t)
	ss := startPeeredSchedulers(t)
	// Every session to scheduler 0, which then holds every host and asks
	// scheduler 1 for each start.
	startIPWorker(t, sv, ss.addrs[:1], "ip-worker", 0)
	cfg := ipCampaign(sv, web, delay, "ipkey")
	wait := runCampaign(t, sv.temporal.Client(), cfg, 4*time.Minute)
	seen := ss.watch(cfg.ID)
	wait()
	got := seen()
	checkEveryPage(t, web, 1)
	most, least, _ := serverSaw(web)
	assert.Equal(t, 1, most, "requests at once at the server; the hosts of one IP share one clock over both schedulers")
	assert.GreaterOrEqual(t, least, delay, "two requests to the IP %s apart at the server; its delay is %s", least.Round(time.Millisecond), delay)
	assert.NotZero(t, got[0].asks, "scheduler 0 asked scheduler 1, the IP's owner, for no start")
	t.Logf("%d requests to %d host names of 127.0.0.1; at most %d at once; smallest gap %s; hosts held and starts asked of the owner (scheduler 1) by scheduler: %+v",
		len(web.starts), web.hosts, most, least.Round(time.Millisecond), got)
}

// Two campaigns keyed by IP crawl the eight host names at once, each held
// by a scheduler of its own: the IP's owner leases its campaign's starts
// on its own clock, the other asks it for each of its campaign's, and the
// server still has one request at a time.
func TestIPKeySharedByTwoCampaignsOnTwoSchedulers(t *testing.T) {
	const delay = 300 * time.Millisecond
	web := startDomainWeb(t, ipHosts, ipPages, 100*time.Millisecond)
	sv := startServices(t)
	ss := startPeeredSchedulers(t)
	// A worker of two sessions, both to scheduler 0: campaign a's two
	// sessions run there, and scheduler 0 consumes its shards.
	startIPWorker(t, sv, ss.addrs[:1], "ip-worker-0", 2)
	a := ipCampaign(sv, web, delay, "ipkey-a")
	a.Fetchers, a.UserAgent = 2, "drover-test-a"
	waitA := runCampaign(t, sv.temporal.Client(), a, 4*time.Minute)
	seenA := ss.watch(a.ID)
	for deadline := time.Now().Add(time.Minute); ss.now(0, a.ID).hosts == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			require.FailNow(t, "scheduler 0 holds no host of campaign a after a minute")
		}
	}
	// Then, the first worker busy with a's sessions, a worker whose
	// sessions go to scheduler 1, the IP's owner: b's shards are consumed
	// there.
	startIPWorker(t, sv, ss.addrs[1:], "ip-worker-1", 2)
	b := ipCampaign(sv, web, delay, "ipkey-b")
	b.Fetchers, b.UserAgent = 2, "drover-test-b"
	waitB := runCampaign(t, sv.temporal.Client(), b, 4*time.Minute)
	seenB := ss.watch(b.ID)
	waitA()
	waitB()
	gotA, gotB := seenA(), seenB()
	checkEveryPage(t, web, 2)
	most, least, by := serverSaw(web)
	assert.Equal(t, 1, most, "requests at once at the server; two campaigns on two schedulers share the IP's clock")
	assert.GreaterOrEqual(t, least, delay, "two requests to the IP %s apart at the server; its delay is %s", least.Round(time.Millisecond), delay)
	assert.NotZero(t, gotA[0].hosts, "the test needs a's hosts on scheduler 0 and b's on scheduler 1: a %+v, b %+v", gotA, gotB)
	assert.NotZero(t, gotB[1].hosts, "the test needs a's hosts on scheduler 0 and b's on scheduler 1: a %+v, b %+v", gotA, gotB)
	assert.NotZero(t, gotA[0].asks, "scheduler 0 asked scheduler 1, the IP's owner, for no start")
	for _, ua := range []string{a.UserAgent, b.UserAgent} {
		assert.GreaterOrEqual(t, by[ua], 40, "campaign %s: requests, want 40 (32 pages, 8 robots.txt)", ua)
	}
	t.Logf("%d requests to %d host names of 127.0.0.1 by two campaigns; at most %d at once; smallest gap %s; requests by campaign %v; hosts held and starts asked of the owner (scheduler 1) by scheduler: a %+v, b %+v",
		len(web.starts), web.hosts, most, least.Round(time.Millisecond), by, gotA, gotB)
}

func ipCampaign(sv *services, web *domainWeb, delay time.Duration, name string) campaign.Config {
	return campaign.Config{ID: fmt.Sprintf("%s-%d", name, rand.IntN(1e9)), Seeds: web.seeds(), Fetchers: 4, AllowPrivate: true,
		PerHostDelay: new(delay), PolitenessKey: campaign.KeyIP, Sinks: []string{"kafka://" + sv.kafka.Addr() + "/" + sv.topic}}
}

// checkEveryPage checks that each page of the web was requested, n times
// at least.
func checkEveryPage(t *testing.T, web *domainWeb, n int) {
	t.Helper()
	web.mu.Lock()
	defer web.mu.Unlock()
	for h := range web.hosts {
		for p := range web.pages {
			path := "/"
			if p > 0 {
				path = fmt.Sprintf("/p/%d", p)
			}
			assert.GreaterOrEqual(t, web.seen[fmt.Sprintf("h%d.drover.test%s", h, path)], n, "h%d.drover.test%s: times requested", h, path)
		}
	}
}

// serverSaw is what the web's server saw: the most requests at once, the
// smallest gap between two starts, and the requests by User-Agent.
func serverSaw(web *domainWeb) (most int, least time.Duration, by map[string]int) {
	web.mu.Lock()
	defer web.mu.Unlock()
	starts := slices.SortedFunc(slices.Values(web.starts), time.Time.Compare)
	least = time.Hour
	for i := 1; i < len(starts); i++ {
		least = min(least, starts[i].Sub(starts[i-1]))
	}
	by = map[string]int{}
	for _, ua := range web.agents {
		by[ua]++
	}
	return web.most, least, by
}

// peeredSchedulers are two schedulers that know each other (Peers, Self),
// scheduler 1 the owner of 127.0.0.1's clock, each with its metrics.
type peeredSchedulers struct {
	addrs  []string
	regs   [2]*prometheus.Registry
	scheds [2]*node.Scheduler
}

func startPeeredSchedulers(t *testing.T) *peeredSchedulers {
	ss := &peeredSchedulers{addrs: freeAddrs(t, 2)}
	for frontier.IPOwner(ss.addrs, "127.0.0.1") != ss.addrs[1] {
		ss.addrs = freeAddrs(t, 2)
	}
	for i := range 2 {
		c := frontier.DefaultServerConfig()
		c.Name, c.Index, c.Replicas = fmt.Sprintf("ipsched-%d", i), i, 2
		c.Peers, c.Self = ss.addrs, ss.addrs[i]
		ss.regs[i] = prometheus.NewRegistry()
		ss.scheds[i] = nodetest.StartScheduler(t, node.SchedulerConfig{Server: c, Listen: ss.addrs[i], SeenPath: filepath.Join(t.TempDir(), "seen"), Metrics: ss.regs[i]})
	}
	return ss
}

// startIPWorker starts a worker whose sessions go to schedulers (the
// K'th session to the K'th), all host names resolving to 127.0.0.1; at
// most sessions FetchSessions (0: the default).
func startIPWorker(t *testing.T, sv *services, schedulers []string, identity string, sessions int) {
	w, err := temporalnode.StartWorkers(sv.temporal.Client(), temporalnode.WorkerConfig{Identity: identity, MaxSessions: sessions, Activities: &activities.Activities{
		Schedulers: schedulers, Token: session.DevToken, KafkaBrokers: sv.kafka.Addr(), Identity: identity, Lookup: (&domainWeb{}).lookup,
	}})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
}

// gatherErrs is the last error a registry's Gather returned.
var gatherErrs atomic.Value

// schedSeen is what one scheduler's metrics showed of a campaign: the
// hosts it held and the starts it asked of another scheduler.
type schedSeen struct{ hosts, asks float64 }

func (ss *peeredSchedulers) now(i int, id string) schedSeen {
	return schedSeen{hosts: gathered(ss.regs[i], "drover_scheduler_hosts", id), asks: gathered(ss.regs[i], "drover_scheduler_remote_slot_asks_total", id)}
}

// watch polls the campaign's series on both schedulers until the
// returned func is called, which returns the most each showed (the
// series go when the campaign closes).
func (ss *peeredSchedulers) watch(id string) func() [2]schedSeen {
	var seen [2]schedSeen
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for i := range ss.regs {
				n := ss.now(i, id)
				seen[i].hosts, seen[i].asks = max(seen[i].hosts, n.hosts), max(seen[i].asks, n.asks)
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() [2]schedSeen {
		close(stop)
		wg.Wait()
		return seen
	}
}

// freeAddrs returns n loopback addresses from freeAddr,
// for schedulers that must know one another's address before they start.
func freeAddrs(t *testing.T, n int) []string {
	var out []string
	for range n {
		out = append(out, freeAddr(t))
	}
	return out
}

// gathered is the value of the series name of campaign in r (0 without).
func gathered(r *prometheus.Registry, name, campaign string) float64 {
	// Gather returns what it could gather with its error: a series it
	// could not is left out, not every series.
	mfs, err := r.Gather()
	if err != nil {
		gatherErrs.Store(err.Error())
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

// The IP's owner goes away mid-crawl (closed, its sessions cut): the
// scheduler that asked it passes it over and keeps the IP's clock itself
// from then on, its first start a delay after it took the clock over, so
// that a request the owner had just started is not overlapped. The crawl
// ends with every page, every two starts at the server the delay apart,
// before the owner went and after.
func TestIPKeyOwnerGone(t *testing.T) {
	const delay = 300 * time.Millisecond
	web := startDomainWeb(t, ipHosts, 8, 30*time.Millisecond)
	sv := startServices(t)
	ss := startPeeredSchedulers(t)
	// Every session to scheduler 0, which then holds every host and asks
	// the owner, scheduler 1, for each start. With sessions on both, the
	// first to subscribe is the active consumer of every shard
	// (single-active-consumer): in a third of the runs that was the owner,
	// which then held every host, asked no one, and was closed after the
	// crawl had ended.
	startIPWorker(t, sv, ss.addrs[:1], "ip-worker", 0)
	cfg := ipCampaign(sv, web, delay, "ipkey-gone")
	wait := runCampaign(t, sv.temporal.Client(), cfg, 4*time.Minute)
	seen := ss.watch(cfg.ID)
	began := time.Now()
	for deadline := began.Add(3 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if n := ss.now(0, cfg.ID); n.asks >= 20 {
			break
		}
		if time.Now().After(deadline) {
			require.FailNowf(t, "too few starts asked of the owner", "scheduler 0 asked the owner for fewer than 20 starts in 3 minutes: %+v, %+v (last gather error: %v)", ss.now(0, cfg.ID), ss.now(1, cfg.ID), gatherErrs.Load())
		}
	}
	t.Logf("20 starts asked of the owner %s after the start", time.Since(began).Round(time.Millisecond))
	if e := gatherErrs.Load(); e != nil {
		t.Logf("a scheduler's metrics could not all be gathered: %v", e)
	}
	web.mu.Lock()
	before, gone := len(web.starts), time.Now()
	web.mu.Unlock()
	ss.scheds[1].Close()
	st := wait()
	got := seen()
	checkEveryPage(t, web, 1)
	most, least, _ := serverSaw(web)
	web.mu.Lock()
	starts := slices.SortedFunc(slices.Values(web.starts), time.Time.Compare)
	web.mu.Unlock()
	// Gaps under the delay, by whether the later start came before the
	// owner went or after.
	var shortBefore, shortAfter, after int
	for i := range starts {
		if starts[i].After(gone) {
			after++
		}
		if i == 0 || starts[i].Sub(starts[i-1]) >= delay {
			continue
		}
		if starts[i].After(gone) {
			shortAfter++
		} else {
			shortBefore++
		}
	}
	assert.GreaterOrEqual(t, after, 20, "requests after the owner went: it did not go mid-crawl")
	assert.Zero(t, shortBefore+shortAfter, "gaps under the delay: %d while the owner was up, %d after it went", shortBefore, shortAfter)
	assert.Equal(t, 1, most, "requests at once at the server")
	t.Logf("owner gone after %d requests; %d requests after; gaps under %s: %d before, %d after; at most %d at once, smallest gap %s; hosts held and starts asked by scheduler %+v; reason %q",
		before, after, delay, shortBefore, shortAfter, most, least.Round(time.Millisecond), got, st.Reason)
}

// The IP's owner, a scheduler process, is SIGKILLed mid-crawl while the
// other scheduler asks it for every start of its hosts: the other passes the dead owner over and keeps
// the IP's clock itself, its first start a delay after it took the clock
// over (the turns the owner had reserved for it are lost with the owner). The crawl ends with every page, one request at a time at the
// server and every two starts the delay apart, before the kill and after.
// The owner is not started again: an owner that returns while the other
// still passes it over keeps a clock of its own meanwhile (NOTES.md).
func TestIPKeyOwnerKilled(t *testing.T) {
	testenv.Long(t)
	const delay = 300 * time.Millisecond
	web := startDomainWeb(t, ipHosts, 8, 30*time.Millisecond)
	sv := startServices(t)
	addrs := freeAddrs(t, 2)
	for frontier.IPOwner(addrs, "127.0.0.1") != addrs[1] {
		addrs = freeAddrs(t, 2)
	}
	metrics := freeAddrs(t, 2)
	var procs [2]*devstack.Proc
	for i := range 2 {
		procs[i] = startPeeredSchedulerProc(t, addrs, i, metrics[i])
	}
	// Every session to scheduler 0, which holds every host and asks the
	// owner for each start.
	startIPWorker(t, sv, addrs[:1], "ip-worker", 0)
	cfg := ipCampaign(sv, web, delay, "ipkey-killed")
	wait := runCampaign(t, sv.temporal.Client(), cfg, 4*time.Minute)
	asks := func() float64 {
		return scrapedSum(t, "http://"+metrics[0]+"/metrics", "drover_scheduler_remote_slot_asks_total", cfg.ID)
	}
	await.For(t, 3*time.Minute, 20*time.Millisecond, "scheduler 0 asking the owner for 20 starts", func() error {
		if n := asks(); n < 20 {
			return fmt.Errorf("%.0f starts asked", n)
		}
		return nil
	})
	asked := asks()
	web.mu.Lock()
	before, inflight, killed := len(web.starts), web.inflight, time.Now()
	web.mu.Unlock()
	procs[1].Kill()
	st := wait()
	checkEveryPage(t, web, 1)
	most, least, _ := serverSaw(web)
	web.mu.Lock()
	starts := slices.SortedFunc(slices.Values(web.starts), time.Time.Compare)
	web.mu.Unlock()
	after := 0
	for i, s := range starts {
		if s.After(killed) {
			after++
		}
		if i > 0 {
			assert.GreaterOrEqual(t, s.Sub(starts[i-1]), delay, "start %d, %s after the kill, came %s after the one before; the delay is %s", i, s.Sub(killed).Round(time.Millisecond), s.Sub(starts[i-1]), delay)
		}
	}
	assert.GreaterOrEqual(t, after, 20, "only %d requests after the kill: the owner did not die mid-crawl", after)
	assert.Equal(t, 1, most, "the server had %d requests at once", most)
	t.Logf("owner killed after %d requests (%.0f starts asked of it, %d under way); %d requests after; at most %d at once, smallest gap %s; reason %q",
		before, asked, inflight, after, most, least.Round(time.Millisecond), st.Reason)
}

// startPeeredSchedulerProc runs scheduler i of addrs as a process that
// knows the others (DROVER_SCHEDULER), with its metrics on metrics, and
// the token of startIPWorker's sessions.
func startPeeredSchedulerProc(t *testing.T, addrs []string, i int, metrics string) *devstack.Proc {
	t.Helper()
	name := fmt.Sprintf("ipsched-%d", i)
	p := startProc(t, name, filepath.Join(binaries(t), "scheduler"),
		[]string{"-listen", addrs[i], "-index", fmt.Sprint(i), "-replicas", fmt.Sprint(len(addrs)), "-seen", filepath.Join(t.TempDir(), "seen"), "-name", name, "-metrics-addr", metrics},
		[]string{"DROVER_TOKEN=" + session.DevToken, "AMQP_URL=" + amqpURL(), "DROVER_SCHEDULER=" + strings.Join(addrs, ",")})
	await.For(t, 20*time.Second, 50*time.Millisecond, name+" answering a control session", func() error {
		checkRunning(t, p)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := session.Client{Token: session.DevToken}.DialControl(ctx, addrs[i])
		if err != nil {
			return err
		}
		return c.Close()
	})
	return p
}

// scrapedSum is the sum of the series of name whose campaign label is
// campaign, in the exposition at u (0 when none).
func scrapedSum(t *testing.T, u, name, campaign string) float64 {
	t.Helper()
	sum := 0.0
	for _, line := range strings.Split(string(scrape(t, u)), "\n") {
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, `campaign="`+campaign+`"`) {
			continue
		}
		if v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

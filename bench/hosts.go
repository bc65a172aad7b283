package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
)

// HostsResult is one host count of the hosts scenario (issue 15): the
// scheduler's memory per active host and its cost per lease.
type HostsResult struct {
	Hosts, Pages  int // virtual hosts, pages per host (all seeded)
	Fleet, Credit int // sessions, and the leases each holds at once
	Fetch         bool
	Prefetch      int
	Publish       time.Duration // every URL, confirmed
	// The scheduler process (/proc/PID/status VmRSS; Go heap in use right
	// after a collection, from its metrics): with the campaign open and no
	// URL (Base), holding every URL (Held), and at the end, every URL done
	// (End: what it keeps of a host after its URLs).
	BaseRSS, HeldRSS, BaseHeap, HeldHeap, EndHeap int64
	// Fill: from the first publish until the scheduler held every URL;
	// FillCPU the scheduler's CPU over it (consuming, no lease).
	Fill, FillCPU time.Duration
	// The lease phase: leases granted (robots.txt included), its wall time
	// until every outcome was recorded, and the scheduler's CPU over it.
	Leases              int64
	LeaseWall, LeaseCPU time.Duration
	EndRSS              int64
	Stats               session.Stats
	Web                 testweb.VirtualCounts
	Err                 string
}

// BytesPerHost is the scheduler's VmRSS above its baseline per active host
// (each holding Pages URLs).
func (r HostsResult) BytesPerHost() float64 {
	return float64(r.HeldRSS-r.BaseRSS) / float64(max(r.Hosts, 1))
}

// runHosts runs the hosts scenario at every count of HostsCounts.
func (o Options) runHosts(ctx context.Context) ([]HostsResult, error) {
	dir, bin, err := o.buildScheduler(ctx, "hosts")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []HostsResult
	var errs []error
	for _, n := range o.HostsCounts {
		sub := filepath.Join(dir, strconv.Itoa(n))
		if err := os.Mkdir(sub, 0o755); err != nil {
			return out, err
		}
		res, err := o.runHostsOne(ctx, bin, sub, n)
		if err != nil {
			res.Err = err.Error()
			errs = append(errs, fmt.Errorf("%d hosts: %w", n, err))
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}

// runHostsOne serves n virtual hosts of HostsPages pages, publishes every
// page's URL into a fresh campaign's shards (confirmed), lets a scheduler
// binary hold them all behind one credit-less session (its prefetch sized
// for it), and then leases them through HostsFleet sessions of HostsCredit
// leases each, fetched (HostsFetch) through the virtual web's lookup hook
// or answered at once.
func (o Options) runHostsOne(ctx context.Context, bin, dir string, n int) (res HostsResult, err error) {
	res = HostsResult{Hosts: n, Pages: o.HostsPages, Fleet: o.HostsFleet, Credit: o.HostsCredit, Fetch: o.HostsFetch}
	web, err := testweb.StartVirtual(testweb.VirtualConfig{Hosts: n, PagesPerHost: o.HostsPages})
	if err != nil {
		return res, err
	}
	defer web.Close()
	urls := n * o.HostsPages
	urlOf := func(i int) string { return web.URL(i/o.HostsPages, i%o.HostsPages) }
	res.Prefetch = hostsPrefetch(n, o.HostsPages, web)

	id := fmt.Sprintf("bench-hosts-%d-%d", n, time.Now().UnixNano())
	ch, topo, closeCampaign, err := o.openCampaign(id)
	if err != nil {
		return res, err
	}
	defer func() { err = errors.Join(err, closeCampaign()) }()

	// pprof is always on: a GET of the heap profile with gc=1 collects
	// first, so the heap read after it is what is live.
	pprofAddr, err := freeAddr()
	if err != nil {
		return res, err
	}
	// -batch 1: the URLs go one to a message, and a scheduler's prefetch
	// counts messages: at its default batch (32) a shard would take
	// prefetch/32 messages (at least 64) and never hold every URL.
	sp, err := startSchedProc(bin, dir, o.AMQPURL, "-prefetch", strconv.Itoa(res.Prefetch), "-batch", "1", "-pprof-addr", pprofAddr)
	if err != nil {
		return res, err
	}
	defer sp.stop()
	profile := func(what, name string) {
		path := os.DevNull
		if o.HostsPprof != "" {
			path = filepath.Join(o.HostsPprof, fmt.Sprintf("%s-%d.pb.gz", name, n))
		}
		if err := saveURL("http://"+pprofAddr+"/debug/pprof/"+what, path); err != nil {
			fmt.Fprintf(o.Log, "bench: hosts: profile %s: %v\n", name, err)
		}
	}
	delay := o.HostsDelay
	cfg := campaign.Config{ID: id, Seeds: []string{web.URL(0, 0)}, Scope: web.Scope(), AllowPrivate: true,
		PerHostDelay: &delay, Sinks: []string{"warc:/unused"}}.WithDefaults()
	idle, err := sp.dialSession(ctx, cfg, "bench-hosts-idle", 1)
	if err != nil {
		return res, err
	}
	defer idle.Close()
	ctl, err := session.Client{Token: session.DevToken}.DialControl(ctx, sp.addr)
	if err != nil {
		return res, err
	}
	defer ctl.Close()
	pid := sp.pid()
	// The baseline: the campaign open, consuming, nothing queued.
	if err := sleepCtx(ctx, 3*time.Second); err != nil {
		return res, err
	}
	res.BaseRSS, _ = procStatusBytes(pid, "VmRSS:")
	profile("heap?gc=1", "heap-base")
	res.BaseHeap = goHeap(sp.metricsURL())
	fmt.Fprintf(o.Log, "bench: hosts: %d hosts x %d pages, scheduler pid %d (prefetch %d), baseline VmRSS %s MB; publishing ...\n", n, o.HostsPages, pid, res.Prefetch, mb(res.BaseRSS))

	cpu0, _ := procCPU(pid)
	start := time.Now()
	if err := publishEach(ctx, ch, topo, urls, urlOf, o.Log); err != nil {
		return res, err
	}
	res.Publish = time.Since(start)
	if err := waitStats(ctx, ctl, sp, id, 5*time.Minute, func(st session.Stats) bool { return st.Held >= int64(urls) }); err != nil {
		return res, fmt.Errorf("waiting for the scheduler to hold %d URLs: %w", urls, err)
	}
	res.Fill = time.Since(start)
	cpu1, _ := procCPU(pid)
	res.FillCPU = cpu1 - cpu0
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return res, err
	}
	res.HeldRSS, _ = procStatusBytes(pid, "VmRSS:")
	profile("heap?gc=1", "heap-held")
	res.HeldHeap = goHeap(sp.metricsURL())
	if o.HostsPprof != "" {
		cpuProfiled := make(chan struct{})
		go func() {
			defer close(cpuProfiled)
			profile("profile?seconds=30", "cpu-lease")
		}()
		defer func() { <-cpuProfiled }()
	}
	fmt.Fprintf(o.Log, "bench: hosts: held %d URLs after %s, VmRSS %s MB (%.0f B/host); leasing ...\n", urls, res.Fill.Round(time.Millisecond), mb(res.HeldRSS), res.BytesPerHost())

	if err := o.leaseAll(ctx, sp, ctl, cfg, web, &res); err != nil {
		return res, err
	}
	res.EndRSS, _ = procStatusBytes(pid, "VmRSS:")
	profile("heap?gc=1", "heap-end")
	res.EndHeap = goHeap(sp.metricsURL())
	res.Web = web.Counts()
	if o.HostsFetch && (res.Web.Missing != 0 || res.Web.Duplicates != 0) {
		return res, fmt.Errorf("the virtual web saw %d pages missing and %d fetched twice", res.Web.Missing, res.Web.Duplicates)
	}
	fmt.Fprintf(o.Log, "bench: hosts: %d leases in %s, scheduler CPU %.1f µs/lease, wall %.1f µs/lease\n", res.Leases, res.LeaseWall.Round(time.Millisecond),
		perLease(res.LeaseCPU, res.Leases), perLease(res.LeaseWall, res.Leases))
	return res, nil
}

// hostsPrefetch is the prefetch that lets a scheduler hold all of the
// pages URLs of each of n hosts: the fullest shard's count and some room.
func hostsPrefetch(n, pages int, web *testweb.Virtual) int {
	var per [frontier.Shards]int
	for h := range n {
		per[frontier.ShardOf(web.Host(h))] += pages
	}
	most := 0
	for _, c := range per {
		most = max(most, c)
	}
	return min(most+64, 65535)
}

// leaseAll runs the fleet until every URL's outcome is recorded, measuring
// the scheduler's CPU and the wall time.
func (o Options) leaseAll(ctx context.Context, sp *schedProc, ctl *session.Control, cfg campaign.Config, web *testweb.Virtual, res *HostsResult) error {
	var f *fetch.Fetcher
	if o.HostsFetch {
		var err error
		if f, err = fetch.New(cfg, fetch.WithLookup(web.Lookup)); err != nil {
			return err
		}
		defer f.Close()
	}
	want := int64(res.Hosts * (res.Pages + 1)) // robots.txt and pages
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var leases atomic.Int64
	var wg sync.WaitGroup
	var sessions []*session.Session
	defer func() {
		cancel()
		for _, s := range sessions {
			s.Close()
		}
		wg.Wait()
	}()
	cpu0, _ := procCPU(sp.pid())
	start := time.Now()
	for i := range o.HostsFleet {
		s, err := sp.dialSession(ctx, cfg, fmt.Sprintf("bench-hosts-%d", i), o.HostsCredit)
		if err != nil {
			return err
		}
		sessions = append(sessions, s)
		for range o.HostsCredit {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-fctx.Done():
						return
					case l, ok := <-s.Leases():
						if !ok {
							return
						}
						s.Report(hostsOutcome(fctx, f, l))
						s.Credit(1)
						leases.Add(1)
					}
				}
			}()
		}
		s.Credit(o.HostsCredit)
	}
	urls := int64(res.Hosts * res.Pages)
	err := waitStats(ctx, ctl, sp, cfg.ID, 10*time.Minute, func(st session.Stats) bool {
		return st.Fetched+st.Failed >= urls && st.Held == 0 && st.InFlight == 0
	})
	res.LeaseWall = time.Since(start)
	cpu1, _ := procCPU(sp.pid())
	res.LeaseCPU = cpu1 - cpu0
	res.Leases = leases.Load()
	if st, serr := ctl.Stats(ctx, cfg.ID); serr == nil {
		res.Stats = st
	}
	if err != nil {
		return fmt.Errorf("waiting for %d outcomes (%d leases of %d): %w", urls, res.Leases, want, err)
	}
	return nil
}

// hostsOutcome fetches l with f (nil: answers at once, as a fetcher whose
// fetch took no time would: robots.txt like the virtual web's, a page
// stored with status 200). Links are not reported: the scenario measures
// leasing, and the plain web's rows measure link publishing.
func hostsOutcome(ctx context.Context, f *fetch.Fetcher, l session.Lease) session.Outcome {
	o := session.Outcome{LeaseID: l.ID}
	if f == nil {
		if l.Kind == session.KindRobots {
			o.Robots = &session.RobotsBody{Status: http.StatusOK, Body: []byte("User-agent: *\nDisallow: /private/\n")}
		} else {
			o.Stored, o.Status = true, http.StatusOK
		}
		return o
	}
	if l.Kind == session.KindRobots {
		rr := f.FetchRobots(ctx, l.URL)
		o.Robots = &session.RobotsBody{Status: rr.Status, Body: rr.Body}
		if rr.Err != nil {
			o.Robots.Error = rr.Err.Error()
		}
		o.Reason, o.HostDown = rr.Reason, rr.HostDown
		return o
	}
	r := f.Fetch(ctx, fetch.Request{URL: l.URL, Depth: l.Depth, Attempt: l.Attempt, MaxAttempts: l.MaxAttempts})
	defer r.Page.Release()
	if r.Err != nil {
		o.Error = r.Err.Error()
	}
	o.Reason, o.HostDown = r.Reason, r.HostDown
	switch {
	case r.Retry:
		o.Retry, o.RetryAfter, o.Status = true, r.RetryAfter, r.Status
	case r.Page != nil:
		o.Stored, o.Status = true, r.Page.Status
	}
	return o
}

// waitStats polls the scheduler's stats of campaign id until done holds,
// for at most wait.
func waitStats(ctx context.Context, ctl *session.Control, sp *schedProc, id string, wait time.Duration, done func(session.Stats) bool) error {
	deadline := time.Now().Add(wait)
	var last session.Stats
	for {
		st, err := ctl.Stats(ctx, id)
		if err == nil {
			last = st
			if done(st) {
				return nil
			}
		}
		if err := sp.alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s (held %d, in flight %d, fetched %d, failed %d, acked %d, published %d)", wait, last.Held, last.InFlight, last.Fetched, last.Failed, last.Acked, last.Published)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// HeapPerHost is the Go heap in use above its baseline per active host.
func (r HostsResult) HeapPerHost() float64 {
	return float64(r.HeldHeap-r.BaseHeap) / float64(max(r.Hosts, 1))
}

// goHeap reads go_memstats_heap_inuse_bytes from a Prometheus endpoint
// (0 when it cannot).
func goHeap(metricsURL string) int64 {
	if metricsURL == "" {
		return 0
	}
	resp, err := http.Get(metricsURL)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, _ := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int64(f)
		}
	}
	return 0
}

func perLease(d time.Duration, n int64) float64 {
	return float64(d.Microseconds()) / float64(max(n, 1))
}

// freeAddr is a loopback address with a port free now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// saveURL writes what a GET of u answers into path.
func saveURL(u, path string) error { return saveURLWithin(0, u, path) }

// saveURLWithin is saveURL bounded by timeout (0: none), so that a process
// that does not answer cannot stall its caller.
func saveURLWithin(timeout time.Duration, u, path string) error {
	resp, err := (&http.Client{Timeout: timeout}).Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

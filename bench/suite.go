package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/drover-crawl/drover/testweb"
)

// Options configure the suite; DefaultOptions are issue 7's.
type Options struct {
	// Exe is the bench binary, re-executed with -child for every run.
	Exe     string
	AMQPURL string

	// Scenario 1, the plain web: raw speed.
	Hosts, PagesPerHost int
	Fleets              []int
	PerHostConcurrency  int
	PerHostDelay        time.Duration
	// DevFleet > 0 adds drover as `make dev` runs it (separate processes)
	// with DevFleet fetchers at DevPerHost per host and DevDelay; DevPerf:
	// perf record its processes into this file (DevPerfEvents: these
	// events instead of CPU samples).
	DevFleet, DevPerHost int
	DevDelay             time.Duration
	// QuorumFleet > 0 adds drover at that fleet on quorum shard queues,
	// beside the classic ones of the other rows (one node: what a
	// quorum queue costs RabbitMQ without its replicas).
	QuorumFleet   int
	DevPerf       string
	DevPerfEvents string
	// Peers on the plain web (colly, scrapy), each at every one of
	// PeerParallelism (Colly's global LimitRule Parallelism, Scrapy's
	// CONCURRENT_REQUESTS); the best row of each is its figure.
	Peers           []string
	PeerParallelism []int
	// Workers > 0 adds a drover run of WorkersFleet fetchers whose workers
	// are that many processes of the worker binary (built from ./worker).
	Workers, WorkersFleet int

	// Scenario 2, the politeness-bound web; PoliteHosts 0 skips it.
	PoliteHosts, PolitePages int
	PoliteDelay              time.Duration
	PoliteFleet              int

	// CPUProfile, when set, is written by the drover run of ProfileFleet.
	CPUProfile   string
	ProfileFleet int

	// Scenario 3 (issue 3), the slow host: SlowHosts x SlowPages at
	// SlowDelay, crawled alone and with one more host of SlowHosts x
	// SlowPages URLs (all seeded) behind robots.txt Crawl-delay
	// SlowCrawlDelay; SlowFleet fetchers.
	SlowHosts, SlowPages int
	SlowDelay            time.Duration
	SlowCrawlDelay       time.Duration
	SlowFleet            int

	// Scenario 4 (issue 3), a backlog: QueuedURLs over QueuedHosts in one
	// campaign's shard queues, a scheduler holding them for QueuedHold.
	QueuedURLs, QueuedHosts int
	QueuedHold              time.Duration

	// Scenario 5 (issue 6), the sinks: SinkWriters goroutines storing
	// SinkPageBytes pages for SinkDuration into each of Sinks.
	Sinks         []string
	SinkWriters   int
	SinkPageBytes int
	SinkDuration  time.Duration
	PostgresURI   string

	// Scenario 6 (issue 15), many hosts: for each of HostsCounts, that
	// many virtual hosts of HostsPages pages held by a scheduler binary,
	// then leased through HostsFleet sessions of HostsCredit leases,
	// fetched (HostsFetch) or answered at once; HostsDelay per host.
	HostsCounts             []int
	HostsPages              int
	HostsFleet, HostsCredit int
	HostsFetch              bool
	HostsDelay              time.Duration
	// HostsPprof, when set, is a directory for the scheduler's heap
	// profiles (every URL held, the end) and a 30 s CPU profile of leasing.
	HostsPprof string

	// Scenario 7 (issue 29), a recrawl: a web of RecrawlHosts x
	// RecrawlPages pages with validators (RecrawlDuplicates of them at a
	// second URL too, RecrawlPageBytes each; 0: testweb's 8 KiB) crawled
	// by RecrawlFleet fetchers into RecrawlSinks, RecrawlChange of its
	// pages changed, then crawled again From the first run.
	RecrawlHosts, RecrawlPages, RecrawlDuplicates int
	RecrawlPageBytes, RecrawlFleet                int
	RecrawlChange                                 float64
	RecrawlSinks                                  []string
	// RecrawlDedup: both runs deduplicate by payload (--dedup), so that
	// the second URLs are revisits of their pages' captures.
	RecrawlDedup bool

	// Scenario 8, scale (opt-in: OptInScenarios): drover as `make dev`
	// runs it on a web of ScaleHosts x ScalePages pages, ScaleFleet
	// fetchers at DevPerHost per host and DevDelay, its processes
	// sampled every ScaleEvery, the crawl bounded by ScaleTimeout; the
	// curve is drawn into ScalePlot (a PNG; "" draws none); ScalePerf:
	// perf record its processes into this file, as DevPerf does for the
	// dev-stack run (with DevPerfEvents too), so that the profiles of the
	// two webs can be read side by side; ScaleHeap: a directory for the
	// scheduler's and the worker's heap profiles, one of each per sample;
	// ScaleSchedulerArgs, ScaleSchedulerEnv, ScaleWorkerEnv: more flags
	// and environment of the stack's scheduler and worker.
	ScaleHosts, ScalePages, ScaleFleet int
	ScaleEvery, ScaleTimeout           time.Duration
	ScalePlot, ScalePerf, ScaleHeap    string
	ScaleSchedulerArgs                 []string
	ScaleSchedulerEnv, ScaleWorkerEnv  []string

	// Scenarios selects what runs: plain, polite, slowhost, queued, sinks,
	// hosts, recrawl (nil: all of AllScenarios), and scale when named.
	Scenarios []string

	// Timeout bounds each crawl; the child is killed a minute after it.
	Timeout time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// DefaultOptions: 20 hosts x 500 pages, fleets 1, 4 and 16 at 4 per host
// and 1 ms; 200 hosts x 20 pages at 250 ms and 1 per host.
func DefaultOptions() Options {
	return Options{
		AMQPURL: "amqp://guest:guest@127.0.0.1:5672/",
		Hosts:   20, PagesPerHost: 500,
		Fleets:             []int{1, 4, 16},
		DevFleet:           8,
		QuorumFleet:        4,
		DevPerHost:         8,
		DevDelay:           time.Millisecond,
		Peers:              []string{KindColly, KindScrapy},
		PeerParallelism:    []int{8, 16, 32},
		WorkersFleet:       4,
		PerHostConcurrency: 4,
		PerHostDelay:       time.Millisecond,
		PoliteHosts:        200, PolitePages: 20,
		PoliteDelay:  250 * time.Millisecond,
		PoliteFleet:  4,
		ProfileFleet: 4,
		SlowHosts:    9, SlowPages: 500,
		SlowDelay:      10 * time.Millisecond,
		SlowCrawlDelay: time.Second,
		SlowFleet:      4,
		QueuedURLs:     1_000_000, QueuedHosts: 10_000,
		QueuedHold:    20 * time.Second,
		Sinks:         sinkKinds,
		SinkWriters:   64,
		SinkPageBytes: 8192,
		SinkDuration:  15 * time.Second,
		PostgresURI:   "postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
		HostsCounts:   []int{1000, 10_000, 100_000},
		HostsPages:    2,
		HostsFleet:    8,
		HostsCredit:   16,
		HostsFetch:    true,
		HostsDelay:    time.Millisecond,
		RecrawlHosts:  20, RecrawlPages: 500, RecrawlDuplicates: 500,
		RecrawlFleet:  4,
		RecrawlChange: 0.1,
		RecrawlDedup:  true,
		RecrawlSinks:  append(slices.Clone(sinkKinds), "warc-captures"),
		ScaleHosts:    10_000, ScalePages: 100,
		ScaleFleet:   8,
		ScaleEvery:   10 * time.Second,
		ScaleTimeout: 2 * time.Hour,
		ScalePlot:    "out/scale.png",
		Timeout:      10 * time.Minute,
		Log:          os.Stderr,
	}
}

// AllScenarios are the suite's scenarios, in the order they run.
var AllScenarios = []string{"plain", "polite", "slowhost", "queued", "sinks", "hosts", "recrawl"}

// OptInScenarios run only when -scenarios names them, after the others:
// scale crawls a million pages, longer than the rest of the suite.
var OptInScenarios = []string{"scale"}

func (o Options) runs(s string) bool { return o.Scenarios == nil || slices.Contains(o.Scenarios, s) }

// Report holds every run of the suite.
type Report struct {
	Opts     Options
	Plain    []Result // drover fleets, colly, raw
	Polite   []Result // drover, colly
	SlowHost []SlowHostResult
	Queued   *QueuedResult
	Sinks    []Result
	Hosts    []HostsResult
	Recrawl  *RecrawlResult
	Scale    *ScaleResult
	Start    time.Time
	Load     string // /proc/loadavg at the start
}

// Run runs every contender on a fresh instance of each web, one at a time.
// It returns the report even when a run failed; the error says which runs
// failed or broke politeness.
func Run(ctx context.Context, o Options) (*Report, error) {
	load, _ := os.ReadFile("/proc/loadavg")
	rep := &Report{Opts: o, Start: time.Now(), Load: string(bytes.TrimSpace(load))}
	var errs []error
	plain := testweb.Config{Hosts: o.Hosts, PagesPerHost: o.PagesPerHost, CrossHost: true, Base: 77}
	type run struct {
		name string
		job  Job
	}
	var runs []run
	for _, f := range o.Fleets {
		j := Job{Kind: KindDrover, Fleet: f, PerHostConcurrency: o.PerHostConcurrency, PerHostDelay: o.PerHostDelay, AMQPURL: o.AMQPURL}
		if o.CPUProfile != "" && f == o.ProfileFleet {
			j.CPUProfile = o.CPUProfile
		}
		runs = append(runs, run{fmt.Sprintf("drover, fleet %d", f), j})
	}
	if o.QuorumFleet > 0 {
		runs = append(runs, run{fmt.Sprintf("drover, fleet %d, quorum shards", o.QuorumFleet), Job{Kind: KindDrover, Fleet: o.QuorumFleet,
			PerHostConcurrency: o.PerHostConcurrency, PerHostDelay: o.PerHostDelay, AMQPURL: o.AMQPURL, QueueType: "quorum"}})
	}
	if o.DevFleet > 0 {
		runs = append(runs, run{fmt.Sprintf("drover as make dev runs it, fleet %d", o.DevFleet), Job{
			Kind: KindDrover, DevStack: true, Fleet: o.DevFleet, PerHostConcurrency: o.DevPerHost, PerHostDelay: o.DevDelay,
			AMQPURL: o.AMQPURL, PerfOut: o.DevPerf, PerfEvents: o.DevPerfEvents,
		}})
	}
	if o.Workers > 0 && o.runs("plain") {
		dir, err := os.MkdirTemp("", "drover-bench-worker-")
		if err != nil {
			return rep, err
		}
		defer os.RemoveAll(dir)
		fmt.Fprintf(o.Log, "bench: building the worker ...\n")
		bin, err := buildWorker(ctx, dir)
		if err != nil {
			return rep, err
		}
		runs = append(runs, run{fmt.Sprintf("drover, fleet %d, %d worker processes", o.WorkersFleet, o.Workers), Job{
			Kind: KindDrover, Fleet: o.WorkersFleet, PerHostConcurrency: o.PerHostConcurrency, PerHostDelay: o.PerHostDelay, AMQPURL: o.AMQPURL,
			Workers: o.Workers, WorkerBin: bin,
		}})
	}
	for _, peer := range o.Peers {
		for _, p := range o.PeerParallelism {
			name := fmt.Sprintf("colly v2 (async), parallelism %d", p)
			if peer == KindScrapy {
				name = fmt.Sprintf("scrapy, CONCURRENT_REQUESTS %d", p)
			}
			runs = append(runs, run{name, Job{Kind: peer, Parallelism: p}})
		}
	}
	runs = append(runs,
		run{"raw GETs (ceiling)", Job{Kind: KindRaw, PerHostConcurrency: o.PerHostConcurrency, Concurrency: o.Hosts * o.PerHostConcurrency}},
	)
	if !o.runs("plain") {
		runs = nil
	}
	for _, r := range runs {
		res, err := o.runOne(ctx, plain, r.name, r.job)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
		}
		rep.Plain = append(rep.Plain, res)
	}
	if o.PoliteHosts > 0 && o.runs("polite") {
		polite := testweb.Config{Hosts: o.PoliteHosts, PagesPerHost: o.PolitePages, CrossHost: true, NoExtras: true, Base: 78}
		bound := float64(o.PoliteHosts) / o.PoliteDelay.Seconds()
		achievable, err := achievableBound(polite, o.PoliteDelay)
		if err != nil {
			return rep, err
		}
		for _, r := range []run{
			{fmt.Sprintf("drover, fleet %d", o.PoliteFleet), Job{Kind: KindDrover, Fleet: o.PoliteFleet, PerHostConcurrency: 1, PerHostDelay: o.PoliteDelay, AMQPURL: o.AMQPURL}},
			{"colly v2 (async), a LimitRule per host", Job{Kind: KindColly, PerHostConcurrency: 1, PerHostDelay: o.PoliteDelay, CollyPerHost: true}},
		} {
			res, err := o.runOne(ctx, polite, r.name, r.job)
			res.Bound, res.Achievable = bound, min(bound, achievable)
			if err != nil {
				errs = append(errs, fmt.Errorf("polite %s: %w", r.name, err))
			} else if r.job.Kind == KindDrover && res.MinGap < o.PoliteDelay {
				errs = append(errs, fmt.Errorf("polite %s: two request starts to one host %s apart, want >= %s", r.name, res.MinGap, o.PoliteDelay))
			}
			rep.Polite = append(rep.Polite, res)
		}
	}
	if o.SlowHosts > 0 && o.runs("slowhost") {
		res, err := o.runSlowHost(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("slow host: %w", err))
		}
		rep.SlowHost = res
	}
	if o.QueuedURLs > 0 && o.runs("queued") {
		res, err := o.runQueued(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("queued: %w", err))
			res.Err = err.Error()
		}
		rep.Queued = &res
	}
	if len(o.Sinks) > 0 && o.runs("sinks") {
		res, err := o.runSinks(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		rep.Sinks = res
	}
	if len(o.HostsCounts) > 0 && o.runs("hosts") {
		res, err := o.runHosts(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("hosts: %w", err))
		}
		rep.Hosts = res
	}
	if o.RecrawlHosts > 0 && o.runs("recrawl") {
		res, err := o.runRecrawlScenario(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("recrawl: %w", err))
		}
		rep.Recrawl = &res
	}
	if o.ScaleHosts > 0 && slices.Contains(o.Scenarios, "scale") {
		res, err := o.runScale(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("scale: %w", err))
			res.Err = err.Error()
		}
		rep.Scale = &res
	}
	return rep, errors.Join(errs...)
}

// runOne starts a fresh web, runs the job in a child process and reads the
// server's log.
func (o Options) runOne(ctx context.Context, cfg testweb.Config, name string, j Job) (Result, error) {
	res := Result{Name: name, Kind: j.Kind}
	web, err := testweb.Start(cfg)
	if err != nil {
		return res, err
	}
	defer web.Close()
	j.Seeds = web.Seeds()
	j.Timeout = o.Timeout
	j.HostPorts = web.Hosts()
	j.Domains = web.IPs()
	if j.Kind == KindRaw {
		j.URLs = interleave(web.Pages())
	}
	fmt.Fprintf(o.Log, "bench: %s on %d hosts x %d pages ...\n", name, web.Config().Hosts, web.Config().PagesPerHost)
	webCPU0, _ := selfUsage()
	child, err := o.child(ctx, j)
	if child.Kind == "" && err != nil {
		return res, err
	}
	webCPU1, _ := selfUsage()
	child.Name = name
	res = child
	res.WebCPU = webCPU1 - webCPU0
	pages := web.Pages()
	res.Missing = len(web.Missing())
	res.Disallowed = len(web.DisallowedHits())
	res.Pages = len(pages) - res.Missing
	dups := web.Duplicates()
	var worst []string
	for u, n := range dups {
		res.Duplicates += n - 1
		if len(worst) < 3 {
			worst = append(worst, fmt.Sprintf("%s x%d", u, n))
		}
	}
	if len(worst) > 0 {
		fmt.Fprintf(o.Log, "bench: %s: %d URLs fetched more than once, e.g. %v\n", name, len(dups), worst)
	}
	reqs := web.Requests()
	res.Requests = len(reqs)
	res.Span, res.MinGap = spanAndGap(reqs)
	if err == nil && res.Err != "" {
		err = errors.New(res.Err)
	}
	fmt.Fprintf(o.Log, "bench: %s: %d pages, %.0f pages/s over the server's span (%.0f over wall), %d duplicates, %d missing; the test web's process: %s CPU s per 1,000 pages\n",
		name, res.Pages, res.PagesPerSec(), res.WallPagesPerSec(), res.Duplicates, res.Missing, perK(res.WebCPU, res.Pages))
	return res, err
}

// child runs j in `Exe -child`, killed two minutes after its timeout.
func (o Options) child(ctx context.Context, j Job) (Result, error) {
	return o.childStop(ctx, j, nil)
}

// childStop is child; with stop non-nil the child's stdin stays open after
// the job (Job.StopOnEOF) and is closed when stop is.
func (o Options) childStop(ctx context.Context, j Job, stop <-chan struct{}) (Result, error) {
	var res Result
	j.StopOnEOF = stop != nil
	in, err := json.Marshal(j)
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, j.Timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Exe, "-child")
	var stdin io.WriteCloser
	if stop == nil {
		cmd.Stdin = bytes.NewReader(in)
	} else if stdin, err = cmd.StdinPipe(); err != nil {
		return res, err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, o.Log
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return res, err
	}
	exited := make(chan struct{})
	if stdin != nil {
		go func() {
			if _, err := stdin.Write(in); err != nil {
				return
			}
			select {
			case <-stop:
			case <-exited:
			}
			stdin.Close()
		}()
	}
	runErr := cmd.Wait()
	close(exited)
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		return Result{}, fmt.Errorf("child %s: %v; no result: %w", j.Kind, runErr, err)
	}
	if runErr != nil {
		return res, fmt.Errorf("child %s: %w", j.Kind, runErr)
	}
	return res, nil
}

// interleave orders URLs round-robin across hosts, as a crawler's frontier
// would, so that the raw fetcher does not queue on one host at a time.
func interleave(urls []string) []string {
	byHost := map[string][]string{}
	var hosts []string
	for _, u := range urls {
		p, err := url.Parse(u)
		if err != nil {
			continue
		}
		if _, ok := byHost[p.Host]; !ok {
			hosts = append(hosts, p.Host)
		}
		byHost[p.Host] = append(byHost[p.Host], u)
	}
	out := make([]string, 0, len(urls))
	for i := 0; len(out) < len(urls); i++ {
		progressed := false
		for _, h := range hosts {
			if i < len(byHost[h]) {
				out = append(out, byHost[h][i])
				progressed = true
			}
		}
		if !progressed {
			break
		}
	}
	return out
}

// spanAndGap returns the time from the first request start to the last,
// and the smallest gap between two request starts to one host (robots.txt
// included: it counts as a request for politeness).
func spanAndGap(reqs []testweb.Request) (span, minGap time.Duration) {
	if len(reqs) == 0 {
		return 0, 0
	}
	first, last := reqs[0].Start, reqs[0].Start
	byHost := map[string][]time.Time{}
	for _, r := range reqs {
		if r.Start.Before(first) {
			first = r.Start
		}
		if r.Start.After(last) {
			last = r.Start
		}
		byHost[r.Host] = append(byHost[r.Host], r.Start)
	}
	minGap = -1
	for _, ts := range byHost {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			if g := ts[i].Sub(ts[i-1]); minGap < 0 || g < minGap {
				minGap = g
			}
		}
	}
	if minGap < 0 {
		minGap = 0
	}
	return last.Sub(first), minGap
}

// achievableBound is the pages/s a web allows with one request per delay
// per host when its largest host needs the most requests: the span is at
// least (that host's requests - 1) x delay. Host 0 of the test web serves
// three pages more than the others (a redirect, a 404, a binary).
func achievableBound(cfg testweb.Config, delay time.Duration) (float64, error) {
	w, err := testweb.Start(cfg)
	if err != nil {
		return 0, err
	}
	defer w.Close()
	perHost := map[string]int{}
	for _, p := range w.Pages() {
		if u, err := url.Parse(p); err == nil {
			perHost[u.Host]++
		}
	}
	most := 0
	for _, n := range perHost {
		most = max(most, n+1) // its robots.txt too
	}
	if most < 2 {
		return 0, fmt.Errorf("politeness web: no host with pages")
	}
	return float64(len(w.Pages())) / (float64(most-1) * delay.Seconds()), nil
}

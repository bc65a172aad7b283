package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/workflows"
)

// LoadOptions configures the load run (`make load`): many fetchers over
// several worker processes and schedulers, on a web of many hosts, with
// every process's memory sampled through the crawl.
type LoadOptions struct {
	Options
	// Workers and Schedulers are process counts (default 3 and 2).
	Workers, Schedulers int
	// Sample is the RSS sampling period (default 250 ms).
	Sample time.Duration
}

// LoadResult is what the load run saw.
type LoadResult struct {
	// Opts are the options the run used, defaults filled in.
	Opts                                    LoadOptions
	Pages, Missing, DupFetches, MissingSink int
	Took                                    time.Duration
	State                                   string
	// Procs is one line per process, in start order.
	Procs []ProcRSS
}

// ProcRSS is one process's resident memory through the crawl.
type ProcRSS struct {
	Name string
	// At25, At50, At100: RSS when the web had served that share of its
	// pages (At100 once the campaign completed). Peak: the kernel's
	// high-water mark (VmHWM) of the last run of the process.
	At25, At50, At100, Peak int64
	// FDs: open file descriptors (sockets mostly) at the end of the crawl,
	// and their peak over the samples.
	FDs, PeakFDs int
	// Restarts of the process during the run (must be 0).
	Restarts int
}

// RunLoad crawls a web of opts.Hosts hosts with opts.Fetchers fetchers
// spread over opts.Workers worker processes and opts.Schedulers
// schedulers, on a private RabbitMQ node, and samples every process's
// RSS.
func RunLoad(ctx context.Context, opts LoadOptions) (LoadResult, error) {
	opts.loadDefaults()
	res := LoadResult{Opts: opts}
	rabbit, done, err := prepare(ctx, &opts.Options, "load")
	if err != nil {
		return res, err
	}
	defer done()
	r, err := startRig(ctx, opts.Options, "load", rabbit, rigSpec{workers: opts.Workers, schedulers: opts.Schedulers}, 70)
	if err != nil {
		return res, fmt.Errorf("start: %w", err)
	}
	defer r.stop()

	pages := r.web.Pages()
	res.Pages = len(pages)
	cfg := r.campaignConfig()
	cfg.ID = "load-" + strconv.FormatInt(time.Now().Unix(), 36)
	begin := time.Now()
	if _, err := r.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.CampaignInput{Config: cfg}); err != nil {
		return res, fmt.Errorf("start campaign: %w", err)
	}
	r.logf("campaign %s started: %d pages on %d hosts, %d fetchers, %d workers, %d schedulers",
		cfg.ID, len(pages), opts.Hosts, opts.Fetchers, opts.Workers, opts.Schedulers)

	procs := r.loadProcs()
	sampler := newRSSSampler(procs)
	sctx, stopSampling := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { sampler.run(sctx, opts.Sample, r.web.Total, len(pages), r.logf) })

	st, err := r.waitCampaign(ctx, cfg.ID, 20*time.Minute)
	res.Took = time.Since(begin)
	res.State = string(st.State)
	sampler.sample()
	sampler.mark(100)
	stopSampling()
	wg.Wait()
	if err != nil {
		return res, fmt.Errorf("campaign: %w", err)
	}
	res.Missing = len(r.web.Missing())
	for _, n := range r.web.Duplicates() {
		res.DupFetches += n - 1
	}
	got := r.kafka.Count(r.topic)
	for _, u := range pages {
		if got[u] == 0 {
			res.MissingSink++
		}
	}
	res.Procs = sampler.result()
	return res, nil
}

// loadDefaults fills what a load run leaves unset, then Options' own
// defaults.
func (opts *LoadOptions) loadDefaults() {
	opts.Hosts = cmp.Or(opts.Hosts, 1000)
	opts.PagesPerHost = cmp.Or(opts.PagesPerHost, 20)
	opts.Fetchers = cmp.Or(opts.Fetchers, 64)
	opts.PerHostDelay = cmp.Or(opts.PerHostDelay, 10*time.Millisecond)
	opts.Workers = cmp.Or(opts.Workers, 3)
	opts.Schedulers = cmp.Or(opts.Schedulers, 2)
	opts.Sample = cmp.Or(opts.Sample, 250*time.Millisecond)
	opts.Options.defaults()
}

// loadProc is one process the load run samples.
type loadProc struct {
	name string
	pid  func() int
	// starts of the process (nil: not supervised by the rig).
	starts func() int
}

func (r *rig) loadProcs() []loadProc {
	var out []loadProc
	for _, c := range append(append([]*devstack.Child{}, r.scheds...), r.workers...) {
		out = append(out, loadProc{name: c.Name(), pid: c.PID, starts: c.Starts})
	}
	out = append(out,
		loadProc{name: "temporal", pid: r.tempo.PID, starts: r.tempo.Starts},
		loadProc{name: "rabbitmq (beam.smp)", pid: r.rabbit.beamPID})
	return out
}

// rssSampler reads each process's RSS periodically and keeps it at the
// crawl's quarter, half and end.
type rssSampler struct {
	procs []loadProc
	mu    sync.Mutex
	at    map[int][]int64 // percent -> RSS per proc
	last  []int64
	peak  []int64
	fds   []int
	pfds  []int
	start []int
}

func newRSSSampler(procs []loadProc) *rssSampler {
	s := &rssSampler{procs: procs, at: map[int][]int64{}, last: make([]int64, len(procs)), peak: make([]int64, len(procs)),
		fds: make([]int, len(procs)), pfds: make([]int, len(procs)), start: make([]int, len(procs))}
	for i, p := range procs {
		if p.starts != nil {
			s.start[i] = p.starts()
		}
	}
	return s
}

func (s *rssSampler) run(ctx context.Context, every time.Duration, served func() int, total int, logf func(string, ...any)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.sample()
		done := served()
		for _, pct := range []int{25, 50} {
			if done*100 >= pct*total && s.mark(pct) {
				logf("%d%% of the web served (%d pages)", pct, done)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample reads every process's current RSS and high-water mark.
func (s *rssSampler) sample() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, p := range s.procs {
		pid := p.pid()
		if pid == 0 {
			continue
		}
		rss, hwm, err := readRSS(pid)
		if err != nil {
			continue
		}
		s.last[i] = rss
		s.peak[i] = max(s.peak[i], hwm, rss)
		if fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			s.fds[i] = len(fds)
			s.pfds[i] = max(s.pfds[i], len(fds))
		}
	}
}

// mark keeps the last sample as the figure at pct; it reports whether pct
// was new.
func (s *rssSampler) mark(pct int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.at[pct]; ok {
		return false
	}
	s.at[pct] = append([]int64(nil), s.last...)
	return true
}

func (s *rssSampler) result() []ProcRSS {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ProcRSS, len(s.procs))
	for i, p := range s.procs {
		out[i] = ProcRSS{Name: p.name, At25: s.at[25][i], At50: s.at[50][i], At100: s.at[100][i], Peak: s.peak[i],
			FDs: s.fds[i], PeakFDs: s.pfds[i]}
		if p.starts != nil {
			out[i].Restarts = p.starts() - s.start[i]
		}
	}
	return out
}

// readRSS returns VmRSS and VmHWM of a process, in bytes.
func readRSS(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %q", pid, k, v)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	return rss, hwm, sc.Err()
}

// PrintLoad writes the load run's result as markdown.
func PrintLoad(w io.Writer, res LoadResult) {
	opts := res.Opts
	fmt.Fprintf(w, "%d pages on %d hosts, %d fetchers over %d workers and %d schedulers, %s per host: campaign %s in %s; missing %d on the web and %d in Kafka, %d duplicate fetches\n\n",
		res.Pages, opts.Hosts, opts.Fetchers, opts.Workers, opts.Schedulers, opts.PerHostDelay, res.State, res.Took.Round(time.Second), res.Missing, res.MissingSink, res.DupFetches)
	fmt.Fprintf(w, "| process | RSS at 25%% | RSS at 50%% | RSS at 100%% | peak RSS | open fds at end (peak) | restarts |\n|---|---|---|---|---|---|---|\n")
	procs := append([]ProcRSS(nil), res.Procs...)
	sort.SliceStable(procs, func(i, j int) bool { return procs[i].Name < procs[j].Name })
	for _, p := range procs {
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %d (%d) | %d |\n", p.Name, mib(p.At25), mib(p.At50), mib(p.At100), mib(p.Peak), p.FDs, p.PeakFDs, p.Restarts)
	}
}

func mib(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/drover-crawl/drover/testweb"
)

// The scale scenario: drover as `make dev` runs it (runDroverDev) on a
// large test web, its processes sampled every ScaleEvery, so that the cost
// of a page can be read as the crawl grows.

// scaleBase is the scale web's second octet: its hosts are 127.82.x.y.
const scaleBase = 82

// ScaleProcs are the processes the scale scenario samples, in the order
// its table prints them.
var ScaleProcs = []string{"scheduler", "worker", "kafka", "temporal", "rabbitmq"}

// Disk the scale scenario asks for before it starts: Kafka's log takes
// about 10 KB a page (an 8 KB page, its headers and the record's
// framing), and Temporal's SQLite file and the scheduler's seen store
// some gigabytes more at a million pages.
const (
	scaleDiskPerPage = 10_000
	scaleDiskBase    = 5_000_000_000
)

// ScaleResult is the scale scenario's run: the child's result completed
// with the server's counts, and its samples as rows.
type ScaleResult struct {
	Result
	Hosts, PagesPerHost, Fleet int
	Rows                       []ScaleRow
	// FirstFifth and LastFifth: pages/s over the first and the last fifth
	// of the pages, by the server's clock (each page at its first request).
	FirstFifth, LastFifth float64
}

// ScaleRow is one sample of the scale scenario: elapsed since the
// campaign's start, the pages the test web had served by then (unique
// pages of Web.Pages, each at its first request), the pages per second
// and the CPU seconds of every sampled process per 1,000 pages since the
// previous sample, and each process's RSS.
type ScaleRow struct {
	Elapsed     time.Duration
	Pages       int
	Fetched     int64 // the scheduler's count; -1: it did not answer
	PagesPerSec float64
	// CPUPerK is -1 when no page was served over the interval.
	CPUPerK float64
	RSS     map[string]int64
}

// runScale runs the scale scenario: a web of ScaleHosts x ScalePages
// pages, drover's dev stack with ScaleFleet fetchers at DevPerHost per
// host and DevDelay, sampled every ScaleEvery. It refuses to start when
// the temporary directory lacks the disk the run needs.
func (o Options) runScale(ctx context.Context) (ScaleResult, error) {
	out := ScaleResult{Hosts: o.ScaleHosts, PagesPerHost: o.ScalePages, Fleet: o.ScaleFleet}
	out.Name = fmt.Sprintf("drover as make dev runs it, fleet %d, %d hosts x %d pages", o.ScaleFleet, o.ScaleHosts, o.ScalePages)
	for _, extra := range []struct {
		what string
		v    []string
	}{{"scheduler flags", o.ScaleSchedulerArgs}, {"scheduler env", o.ScaleSchedulerEnv}, {"worker env", o.ScaleWorkerEnv}} {
		if len(extra.v) > 0 {
			out.Name += fmt.Sprintf(", %s %s", extra.what, strings.Join(extra.v, " "))
		}
	}
	out.Kind = KindDrover
	pages := int64(o.ScaleHosts) * int64(o.ScalePages)
	if err := checkDisk(os.TempDir(), scaleDiskBase+pages*scaleDiskPerPage, pages); err != nil {
		return out, err
	}
	web, err := testweb.Start(testweb.Config{Hosts: o.ScaleHosts, PagesPerHost: o.ScalePages, CrossHost: true, Base: scaleBase})
	if err != nil {
		return out, fmt.Errorf("test web of %d hosts x %d pages: %w", o.ScaleHosts, o.ScalePages, err)
	}
	defer web.Close()
	j := Job{Kind: KindDrover, DevStack: true, Seeds: web.Seeds(), Fleet: o.ScaleFleet, PerHostConcurrency: o.DevPerHost,
		PerHostDelay: o.DevDelay, AMQPURL: o.AMQPURL, Timeout: o.ScaleTimeout, SampleEvery: o.ScaleEvery,
		PerfOut: o.ScalePerf, PerfEvents: o.DevPerfEvents, HeapDir: o.ScaleHeap,
		SchedulerArgs: o.ScaleSchedulerArgs, SchedulerEnv: o.ScaleSchedulerEnv, WorkerEnv: o.ScaleWorkerEnv,
		// More seed hosts than a config carries as its scope
		// (campaign.MaxSeedHosts): a user gives --scope.
		Scope: []string{fmt.Sprintf(`^http://127\.%d\.`, scaleBase)}}
	fmt.Fprintf(o.Log, "bench: scale: %s (%d URLs), sampled every %s ...\n", out.Name, len(web.Pages()), o.ScaleEvery)
	webCPU0, _ := selfUsage()
	child, err := o.child(ctx, j)
	webCPU1, _ := selfUsage()
	name := out.Name
	out.Result = child
	out.Name, out.Kind = name, KindDrover
	if child.Kind == "" && err != nil {
		out.Err = err.Error()
		return out, err
	}
	fillFromWeb(&out.Result, web)
	out.WebCPU = webCPU1 - webCPU0
	firsts := firstRequests(web.Requests(), web.Pages())
	out.Rows = scaleRows(child.Samples, firsts)
	out.FirstFifth, out.LastFifth = fifths(firsts)
	if err == nil && out.Err != "" {
		err = errors.New(out.Err)
	}
	if err == nil && (out.Missing > 0 || out.Duplicates > 0) {
		err = fmt.Errorf("%d pages missing, %d duplicate fetches (want 0 and 0)", out.Missing, out.Duplicates)
	}
	if err != nil && out.Err == "" {
		out.Err = err.Error()
	}
	if o.ScalePlot != "" && len(out.Rows) > 1 {
		if perr := writeScalePlot(o.ScalePlot, out); perr != nil {
			err = errors.Join(err, perr)
		} else {
			fmt.Fprintf(o.Log, "bench: scale: plot written to %s\n", o.ScalePlot)
		}
	}
	return out, err
}

// checkDisk fails, saying what to do, when dir's file system has fewer
// than need bytes free for a run of pages pages.
func checkDisk(dir string, need, pages int64) error {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return fmt.Errorf("free disk of %s: %w", dir, err)
	}
	if free := int64(fs.Bavail) * fs.Bsize; free < need {
		return fmt.Errorf("%s has %.1f GB free; %d pages need about %.1f GB (Kafka's log at %d KB a page, and %.0f GB more): free space, point TMPDIR elsewhere, or lower -scale-hosts / -scale-pages",
			dir, float64(free)/1e9, pages, float64(need)/1e9, scaleDiskPerPage/1000, float64(scaleDiskBase)/1e9)
	}
	return nil
}

// firstRequests returns the time of the first request to each page of
// pages that was requested, sorted.
func firstRequests(reqs []testweb.Request, pages []string) []time.Time {
	want := make(map[string]bool, len(pages))
	for _, p := range pages {
		want[p] = true
	}
	var firsts []time.Time
	for _, r := range reqs {
		if want[r.URL] {
			want[r.URL] = false
			firsts = append(firsts, r.Start)
		}
	}
	slices.SortFunc(firsts, func(a, b time.Time) int { return a.Compare(b) })
	return firsts
}

// scaleRows turns samples into rows, counting each sample's pages from
// firsts (sorted): those first requested at or before the sample.
func scaleRows(samples []Sample, firsts []time.Time) []ScaleRow {
	pagesAt := func(t time.Time) int {
		return sort.Search(len(firsts), func(i int) bool { return firsts[i].After(t) })
	}
	var rows []ScaleRow
	for i, s := range samples {
		row := ScaleRow{Pages: pagesAt(s.At), Fetched: s.Fetched, CPUPerK: -1, RSS: map[string]int64{}}
		for _, p := range s.Procs {
			row.RSS[p.Name] = p.RSS
		}
		if i > 0 {
			prev := samples[i-1]
			row.Elapsed = s.At.Sub(samples[0].At)
			n := row.Pages - rows[i-1].Pages
			row.PagesPerSec = perSec(float64(n), s.At.Sub(prev.At))
			if n > 0 {
				row.CPUPerK = cpuBetween(prev, s).Seconds() * 1000 / float64(n)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// cpuBetween is the CPU time every process used from sample a to b; a
// process whose PID changed (restarted) or that is not running in either
// counts its time in b since its start, or nothing.
func cpuBetween(a, b Sample) time.Duration {
	var d time.Duration
	for _, p := range b.Procs {
		d += procCPUBetween(a, p)
	}
	return d
}

// procCPUBetween is the CPU p (of a later sample) used since sample a: all
// of it when it is a process a did not see.
func procCPUBetween(a Sample, p ProcSample) time.Duration {
	q := a.Proc(p.Name)
	switch {
	case p.PID == 0:
		return 0
	case q.PID != p.PID:
		return p.CPU
	}
	return p.CPU - q.CPU
}

// ProcCPUPerK is the CPU seconds per 1,000 pages of each sampled process
// over the whole crawl, in the samples' order; nil without two samples.
func (r ScaleResult) ProcCPUPerK() (names []string, perK []float64) {
	if len(r.Samples) < 2 || r.Pages == 0 {
		return nil, nil
	}
	for _, p := range r.Samples[0].Procs {
		var d time.Duration
		for i := 1; i < len(r.Samples); i++ {
			d += procCPUBetween(r.Samples[i-1], r.Samples[i].Proc(p.Name))
		}
		names, perK = append(names, p.Name), append(perK, d.Seconds()*1000/float64(r.Pages))
	}
	return names, perK
}

// fifths returns the pages/s over the first and the last fifth of the
// pages of firsts (sorted): a fifth of them over the time from the
// first request to the request a fifth later, and over the last fifth's
// time likewise; 0 and 0 with fewer than 10 pages.
func fifths(firsts []time.Time) (first, last float64) {
	n := len(firsts)
	k := n / 5
	if k < 2 {
		return 0, 0
	}
	return perSec(float64(k), firsts[k].Sub(firsts[0])), perSec(float64(k), firsts[n-1].Sub(firsts[n-1-k]))
}

// ScaleCPUPerK is the CPU seconds of every sampled process per 1,000
// pages, from the first sample to the last; -1 without pages.
func (r ScaleResult) ScaleCPUPerK() float64 {
	if len(r.Samples) < 2 || r.Pages == 0 {
		return -1
	}
	var d time.Duration
	for i := 1; i < len(r.Samples); i++ {
		d += cpuBetween(r.Samples[i-1], r.Samples[i])
	}
	return d.Seconds() * 1000 / float64(r.Pages)
}

// PeakRSS is the peak resident set (VmHWM at the end) of the stack's
// process name, worker, scheduler or kafka; the largest sampled RSS when
// the end's reading is missing.
func (r ScaleResult) PeakRSS(name string) int64 {
	for _, p := range r.WorkerProcs {
		if p.Identity == name && p.HWM > 0 {
			return p.HWM
		}
	}
	var peak int64
	for _, row := range r.Rows {
		peak = max(peak, row.RSS[name])
	}
	return peak
}

package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/dirsize"
)

// SeenOptions configure the seen-set benchmark (issue 12): a crawl's use of
// the store, driven as fast as the store allows, without RabbitMQ or HTTP.
type SeenOptions struct {
	// URLs is how many URLs end queued and done.
	URLs int
	// Writers are concurrent record goroutines, as the scheduler runs one
	// per outcome batch.
	Writers int
	// PagesPerBatch outcomes are recorded together: one Queued of their
	// links, one MarkQueued of the new ones, one MarkDone of the pages.
	PagesPerBatch int
	// LinksPerPage links are looked up per page: one new URL and the rest
	// drawn from the URLs already queued.
	LinksPerPage int
	// Hosts the URLs spread over (it only shapes the URL strings).
	Hosts int
	// Dir holds the stores (a temporary directory when empty); each run
	// removes its own.
	Dir string
	// Log receives progress lines.
	Log io.Writer
}

// DefaultSeenOptions: 10 million URLs, 2 writers (one per core of the
// development machines: more measure the Go scheduler's queue, not the
// store), 4 pages per batch, 8 links per page.
func DefaultSeenOptions() SeenOptions {
	return SeenOptions{URLs: 10_000_000, Writers: 2, PagesPerBatch: 4, LinksPerPage: 8, Hosts: 100_000, Log: os.Stderr}
}

// seenStore is what the benchmark needs of a store.
type seenStore interface {
	Queued(c string, keys []seen.Key) ([]bool, error)
	MarkQueued(c string, keys []seen.Key) error
	Done(c string, k seen.Key) (bool, error)
	MarkDone(c string, keys []seen.Key) error
	DiskBytes() int64
	Close() error
}

// SeenStores are the stores the benchmark knows, by name.
var SeenStores = map[string]func(dir string) (seenStore, error){
	"pebble": func(dir string) (seenStore, error) {
		return seen.OpenPebble(dir, seen.PebbleOptions{})
	},
	"pebble-fsync": func(dir string) (seenStore, error) {
		return seen.OpenPebble(dir, seen.PebbleOptions{FsyncEveryMark: true})
	},
}

// Latency is a distribution of call times.
type Latency struct {
	N                   int
	P50, P99, P999, Max time.Duration
}

func (l Latency) String() string {
	if l.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s", us(l.P50), us(l.P99))
}

func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1e3) }

// The calls measured.
const (
	opDone = iota
	opQueued
	opMarkQueued
	opMarkDone
	nOps
)

var opNames = [nOps]string{"Done", "Queued", "MarkQueued", "MarkDone"}

// SeenResult is one store's run.
type SeenResult struct {
	Store string
	URLs  int
	Load  time.Duration
	// Bytes on disk: at the end of the load (store open), after Close,
	// and after a full compaction (stores that have one).
	OpenBytes, ClosedBytes, CompactedBytes int64
	// Latency of every call, and of the calls during which a compaction
	// ran (stores that report it).
	Ops, DuringCompaction [nOps]Latency
	// OnCPU is the CPU time of the calling thread in each call (the
	// writers are locked to their threads): the call's own work, without
	// the time it waited to be scheduled, for disk reads or for locks.
	OnCPU [nOps]Latency
	Err   string
}

// RunSeen runs the benchmark on one store.
func (o SeenOptions) RunSeen(store string) (res SeenResult) {
	res = SeenResult{Store: store, URLs: o.URLs}
	if err := o.runSeen(store, &res); err != nil {
		res.Err = err.Error()
	}
	return res
}

func (o SeenOptions) runSeen(name string, res *SeenResult) error {
	open := SeenStores[name]
	if open == nil {
		return fmt.Errorf("no store %q", name)
	}
	dir, err := os.MkdirTemp(o.Dir, "drover-seenbench-"+name+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := open(filepath.Join(dir, "seen"))
	if err != nil {
		return err
	}
	defer func() {
		if s != nil {
			s.Close()
		}
	}()
	compacting := func() bool { return false }
	if p, ok := s.(interface{ Compacting() int }); ok {
		compacting = func() bool { return p.Compacting() > 0 }
	}
	key := func(i int64) seen.Key {
		return seen.KeyOf(fmt.Sprintf("http://host%d.example/p/%d", i%int64(o.Hosts), i))
	}
	const c = "seenbench"
	// Seeds, so that the first pages have known links to draw.
	const seeds = 1000
	var newNext, doneNext atomic.Int64
	seedKeys := make([]seen.Key, seeds)
	for i := range seedKeys {
		seedKeys[i] = key(int64(i))
	}
	if err := s.MarkQueued(c, seedKeys); err != nil {
		return err
	}
	newNext.Store(seeds)

	type samples struct{ all, comp, cpu [nOps][]uint32 }
	per := make([]samples, o.Writers)
	var wg sync.WaitGroup
	errs := make(chan error, o.Writers)
	start := time.Now()
	stop := make(chan struct{})
	go func() { // progress
		t := time.NewTicker(30 * time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				d := doneNext.Load()
				fmt.Fprintf(o.Log, "seenbench: %s: %d of %d URLs done in %s, %.1f bytes/URL on disk\n",
					name, d, o.URLs, time.Since(start).Round(time.Second), float64(s.DiskBytes())/float64(max(d, 1)))
			}
		}
	}()
	for w := range o.Writers {
		wg.Go(func() {
			// Locked, so that the thread's CPU time is the calls'.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			rng := rand.New(rand.NewPCG(uint64(w), 12))
			sm := &per[w]
			measure := func(op int, f func() error) error {
				c0 := compacting()
				cpu0 := threadCPU()
				t0 := time.Now()
				err := f()
				d := time.Since(t0)
				cpu := threadCPU() - cpu0
				ns := uint32(min(d.Nanoseconds(), 1<<32-1))
				sm.all[op] = append(sm.all[op], ns)
				sm.cpu[op] = append(sm.cpu[op], uint32(min(max(cpu, 0), 1<<32-1)))
				if c0 || compacting() {
					sm.comp[op] = append(sm.comp[op], ns)
				}
				return err
			}
			pages := make([]seen.Key, 0, o.PagesPerBatch)
			links := make([]seen.Key, 0, o.PagesPerBatch*o.LinksPerPage)
			var fresh []seen.Key
			for {
				first := doneNext.Add(int64(o.PagesPerBatch)) - int64(o.PagesPerBatch)
				if first >= int64(o.URLs) {
					return
				}
				pages, links, fresh = pages[:0], links[:0], fresh[:0]
				for i := first; i < min(first+int64(o.PagesPerBatch), int64(o.URLs)); i++ {
					k := key(i)
					pages = append(pages, k)
					// The delivery: is it a duplicate?
					if err := measure(opDone, func() error { _, err := s.Done(c, k); return err }); err != nil {
						errs <- err
						return
					}
					if n := newNext.Add(1) - 1; n < int64(o.URLs) {
						links = append(links, key(n))
					}
					known := newNext.Load()
					for range o.LinksPerPage - 1 {
						links = append(links, key(rng.Int64N(min(known, int64(o.URLs)))))
					}
				}
				var queued []bool
				if err := measure(opQueued, func() (err error) { queued, err = s.Queued(c, links); return err }); err != nil {
					errs <- err
					return
				}
				for i, q := range queued {
					if !q {
						fresh = append(fresh, links[i])
					}
				}
				if len(fresh) > 0 {
					if err := measure(opMarkQueued, func() error { return s.MarkQueued(c, fresh) }); err != nil {
						errs <- err
						return
					}
				}
				if err := measure(opMarkDone, func() error { return s.MarkDone(c, pages) }); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	res.Load = time.Since(start)
	close(errs)
	for err := range errs {
		return err
	}
	res.OpenBytes = s.DiskBytes()
	if m, ok := s.(interface{ Metrics() string }); ok {
		fmt.Fprintf(o.Log, "seenbench: %s: the store's metrics at the end of the load:\n%s\n", name, m.Metrics())
	}
	for op := range nOps {
		var all, comp, cpu []uint32
		for w := range per {
			all = append(all, per[w].all[op]...)
			comp = append(comp, per[w].comp[op]...)
			cpu = append(cpu, per[w].cpu[op]...)
			per[w].all[op], per[w].comp[op], per[w].cpu[op] = nil, nil, nil
		}
		res.Ops[op], res.DuringCompaction[op], res.OnCPU[op] = latency(all), latency(comp), latency(cpu)
	}
	if err := s.Close(); err != nil {
		return err
	}
	s = nil
	res.ClosedBytes = dirsize.Of(filepath.Join(dir, "seen"))
	if strings.HasPrefix(name, "pebble") {
		p, err := seen.OpenPebble(filepath.Join(dir, "seen"), seen.PebbleOptions{})
		if err != nil {
			return err
		}
		fmt.Fprintf(o.Log, "seenbench: %s: compacting the whole store ...\n", name)
		if err := p.Compact(); err != nil {
			p.Close()
			return err
		}
		if err := p.Close(); err != nil {
			return err
		}
		res.CompactedBytes = dirsize.Of(filepath.Join(dir, "seen"))
	}
	return nil
}

func latency(ns []uint32) Latency {
	if len(ns) == 0 {
		return Latency{}
	}
	slices.Sort(ns)
	q := func(p float64) time.Duration { return time.Duration(ns[min(int(p*float64(len(ns))), len(ns)-1)]) }
	return Latency{N: len(ns), P50: q(0.50), P99: q(0.99), P999: q(0.999), Max: time.Duration(ns[len(ns)-1])}
}

// WriteSeenTable prints the results as a markdown table.
func WriteSeenTable(w io.Writer, o SeenOptions, rs []SeenResult) {
	fmt.Fprintf(w, "%d URLs, %d writers, %d pages per batch, %d links per page (1 new); p50 / p99 of each call.\n\n", o.URLs, o.Writers, o.PagesPerBatch, o.LinksPerPage)
	fmt.Fprintln(w, "| store | load | bytes/URL open / closed / compacted | Done | Queued | MarkQueued | MarkDone | p99 during compaction (Done / Queued / MarkQueued / MarkDone) | calls during compaction | max MarkQueued / MarkDone | on-CPU Done / Queued p50 / p99 |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
	for _, r := range rs {
		if r.Err != "" {
			fmt.Fprintf(w, "| %s | error: %s ||||||||||\n", r.Store, r.Err)
			continue
		}
		per := func(b int64) string {
			if b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", float64(b)/float64(r.URLs))
		}
		comp, share := "-", "-"
		if r.DuringCompaction[opMarkDone].N > 0 {
			comp = fmt.Sprintf("%s / %s / %s / %s", us(r.DuringCompaction[opDone].P99), us(r.DuringCompaction[opQueued].P99),
				us(r.DuringCompaction[opMarkQueued].P99), us(r.DuringCompaction[opMarkDone].P99))
			n, nc := 0, 0
			for op := range nOps {
				n += r.Ops[op].N
				nc += r.DuringCompaction[op].N
			}
			share = fmt.Sprintf("%.0f%%", 100*float64(nc)/float64(max(n, 1)))
		}
		fmt.Fprintf(w, "| %s | %s | %s / %s / %s | %s | %s | %s | %s | %s | %s | %s / %s | %s ; %s |\n", r.Store, r.Load.Round(time.Second),
			per(r.OpenBytes), per(r.ClosedBytes), per(r.CompactedBytes),
			r.Ops[opDone], r.Ops[opQueued], r.Ops[opMarkQueued], r.Ops[opMarkDone], comp, share,
			time.Duration(r.Ops[opMarkQueued].Max).Round(time.Microsecond), time.Duration(r.Ops[opMarkDone].Max).Round(time.Microsecond),
			r.OnCPU[opDone], r.OnCPU[opQueued])
	}
}

// threadCPU is the CPU time of the calling thread, in nanoseconds.
func threadCPU() int64 {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return 0
	}
	return ts.Nano()
}

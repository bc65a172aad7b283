package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/session"
)

// Sample is one reading of a stack's processes during a crawl.
type Sample struct {
	At time.Time `json:"at"`
	// Fetched is the scheduler's count of pages fetched (its campaign
	// stats); -1 when it did not answer.
	Fetched int64        `json:"fetched"`
	Procs   []ProcSample `json:"procs"`
}

// ProcSample is one process at a Sample: its CPU time since it started
// (utime + stime of /proc/PID/stat) and its resident set (VmRSS). A
// process not running reads PID 0 and zeros.
type ProcSample struct {
	Name string        `json:"name"`
	PID  int           `json:"pid"`
	CPU  time.Duration `json:"cpu"`
	RSS  int64         `json:"rss"`
}

// Proc returns the reading of the process called name, or a zero one.
func (s Sample) Proc(name string) ProcSample {
	for _, p := range s.Procs {
		if p.Name == name {
			return p
		}
	}
	return ProcSample{Name: name}
}

// sampleTarget is a process to sample: pid is asked at every sample, so a
// supervised process that was restarted is read under its new PID.
type sampleTarget struct {
	name string
	pid  func() int
}

// stackSampler reads its targets every interval until stop.
type stackSampler struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	samples []Sample
	read    func() Sample
}

// startSampler takes a first sample now and one every interval; fetched,
// when not nil, gives the scheduler's count of pages fetched (or -1), and
// also, when not nil, is called with the time since the start at each
// sample. Every sample is logged to stderr as it is taken.
func startSampler(ctx context.Context, every time.Duration, targets []sampleTarget, fetched func(context.Context) int64, also func(time.Duration)) *stackSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &stackSampler{cancel: cancel, done: make(chan struct{})}
	start := time.Now()
	s.read = func() Sample {
		smp := Sample{At: time.Now(), Fetched: -1}
		for _, t := range targets {
			p := ProcSample{Name: t.name, PID: t.pid()}
			if p.PID != 0 {
				p.CPU, _ = procCPU(p.PID)
				p.RSS, _ = procStatusBytes(p.PID, "VmRSS:")
			}
			smp.Procs = append(smp.Procs, p)
		}
		if fetched != nil {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			smp.Fetched = fetched(fctx)
			cancel()
		}
		var rss []string
		for _, p := range smp.Procs {
			rss = append(rss, fmt.Sprintf("%s %s", p.Name, mb(p.RSS)))
		}
		fmt.Fprintf(os.Stderr, "bench: sample at %s: the scheduler counts %d pages fetched; RSS MB: %s\n",
			smp.At.Sub(start).Round(time.Second), smp.Fetched, strings.Join(rss, ", "))
		if also != nil {
			also(smp.At.Sub(start))
		}
		return smp
	}
	s.samples = append(s.samples, s.read())
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			smp := s.read()
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
		}
	}()
	return s
}

// stop ends the sampling, takes a last sample and returns them all.
func (s *stackSampler) stop() []Sample {
	s.cancel()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(s.samples, s.read())
}

// schedulerFetched reads the count of pages fetched from the campaign's
// stats on the scheduler at addr (frontier key id), or -1.
func schedulerFetched(addr, id string) func(context.Context) int64 {
	return func(ctx context.Context) int64 {
		st, err := session.Client{Token: session.DevToken}.CampaignStats(ctx, []string{addr}, id)
		if err != nil {
			return -1
		}
		return st.Fetched
	}
}

// heapProfiles returns a sampler's also that saves the heap profile of
// each process (name: its pprof address) into dir, as
// heap-NAME-ELAPSED.pb.gz; a profile that cannot be read is logged.
func heapProfiles(dir string, addrs map[string]string) func(time.Duration) {
	return func(at time.Duration) {
		for name, a := range addrs {
			path := filepath.Join(dir, fmt.Sprintf("heap-%s-%04ds.pb.gz", name, int(at.Round(time.Second).Seconds())))
			if err := saveURLWithin(10*time.Second, "http://"+a+"/debug/pprof/heap", path); err != nil {
				fmt.Fprintf(os.Stderr, "bench: heap profile of %s: %v\n", name, err)
			}
		}
	}
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// Contenders, the Kind of a Job.
const (
	KindDrover = "drover"
	KindColly  = "colly"
	KindRaw    = "raw"
	KindScrapy = "scrapy"
	KindSink   = "sink"
	// KindRecrawl: two drover runs on one stack, the second --from the
	// first (runRecrawl).
	KindRecrawl = "recrawl"
)

// Job is what the parent asks a child process to do, as JSON on its stdin.
type Job struct {
	Kind  string   `json:"kind"`
	Seeds []string `json:"seeds"`
	// URLs are the pages the raw fetcher GETs (the web's Pages, interleaved
	// across hosts).
	URLs []string `json:"urls,omitempty"`
	// Domains are the web's host names, Colly's AllowedDomains.
	Domains []string `json:"domains,omitempty"`
	// HostPorts are the web's "IP:PORT", Scrapy's scope.
	HostPorts []string `json:"host_ports,omitempty"`
	// Parallelism (colly, scrapy): Colly's one global LimitRule's
	// Parallelism; Scrapy's CONCURRENT_REQUESTS (and per domain).
	Parallelism int `json:"parallelism,omitempty"`
	// CollyPerHost (the politeness-bound web only): one Colly LimitRule per
	// host (PerHostConcurrency, PerHostDelay) instead of the global one, as
	// a polite Colly user sets it up; a rule's Parallelism and Delay are
	// shared by every domain it matches.
	CollyPerHost bool `json:"colly_per_host,omitempty"`

	Fleet              int           `json:"fleet,omitempty"`
	PerHostConcurrency int           `json:"per_host_concurrency"`
	PerHostDelay       time.Duration `json:"per_host_delay"`
	// Concurrency is the raw fetcher's number of workers.
	Concurrency int    `json:"concurrency,omitempty"`
	AMQPURL     string `json:"amqp_url,omitempty"`
	// Scope (drover): the campaign's scope regexes (none: the seeds'
	// hosts).
	Scope []string `json:"scope,omitempty"`
	// QueueType (drover): the campaign's shard queue type, quorum or
	// classic ("" the scheduler's default: classic on one node).
	QueueType string `json:"queue_type,omitempty"`
	// Workers (drover): run the Temporal workers as this many processes of
	// the worker binary WorkerBin rather than in the child.
	Workers    int    `json:"workers,omitempty"`
	WorkerBin  string `json:"worker_bin,omitempty"`
	CPUProfile string `json:"cpu_profile,omitempty"`
	// DevStack (drover): run the stack as `make dev` does, every part a
	// process of its own (runDroverDev); PerfOut: perf record its
	// processes into this file, sampling CPU (stacks) or, with PerfEvents,
	// recording those events (perf record -e).
	DevStack   bool   `json:"dev_stack,omitempty"`
	PerfOut    string `json:"perf_out,omitempty"`
	PerfEvents string `json:"perf_events,omitempty"`
	// SampleEvery (drover, DevStack): read the stack's processes every
	// SampleEvery over the crawl (Result.Samples).
	SampleEvery time.Duration `json:"sample_every,omitempty"`
	// HeapDir (drover, DevStack, with SampleEvery): save the scheduler's
	// and the worker's heap profiles into this directory at every sample
	// (heap-scheduler-ELAPSED.pb.gz, heap-worker-ELAPSED.pb.gz).
	HeapDir string `json:"heap_dir,omitempty"`
	// SchedulerArgs, SchedulerEnv, WorkerEnv (drover, DevStack): more
	// flags of the scheduler, and more environment (NAME=value) of the
	// scheduler and the worker, to try their memory settings.
	SchedulerArgs []string `json:"scheduler_args,omitempty"`
	SchedulerEnv  []string `json:"scheduler_env,omitempty"`
	WorkerEnv     []string `json:"worker_env,omitempty"`
	// Timeout bounds the crawl itself; the parent kills the child a little
	// after it.
	Timeout time.Duration `json:"timeout"`

	// StopOnEOF (drover): the parent keeps the child's stdin open after the
	// job and closes it to say "stop now"; the child then sends the
	// campaign its stop signal and a "stopped" end counts as success.
	// (recrawl: closing it says "the web changed: start run 2".)
	StopOnEOF bool `json:"stop_on_eof,omitempty"`

	// Sink jobs (KindSink): Sink is kafka, warc or postgres.
	Sink        string        `json:"sink,omitempty"`
	Writers     int           `json:"writers,omitempty"`
	PageBytes   int           `json:"page_bytes,omitempty"`
	Duration    time.Duration `json:"duration,omitempty"`
	PostgresURI string        `json:"postgres_uri,omitempty"`

	// Sinks (KindRecrawl): the sinks of both runs, of kafka, warc and
	// postgres (PostgresURI).
	Sinks []string `json:"sinks,omitempty"`
	// Dedup (KindRecrawl): both runs store a payload another URL stored
	// as a revisit of it (campaign.Config.Dedup).
	Dedup bool `json:"dedup,omitempty"`
}

// Result is what a child measured, as JSON on its stdout, completed by the
// parent with what the web's server saw.
type Result struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Wall is the crawl's time as the crawler saw it: from the first Visit
	// (drover: ExecuteWorkflow) to the end (drover: the workflow's result),
	// setup and teardown of the stack excluded.
	Wall time.Duration `json:"wall"`
	// Fetched is the crawler's own count of responses, where it keeps one.
	Fetched int64  `json:"fetched"`
	State   string `json:"state,omitempty"`
	Err     string `json:"err,omitempty"`
	// Config is how the contender was set up, printed beside its row.
	Config string `json:"config,omitempty"`

	CPU         time.Duration `json:"cpu"`     // the crawler process, over Wall
	MaxRSS      int64         `json:"max_rss"` // the crawler process, its whole life
	TemporalCPU time.Duration `json:"temporal_cpu,omitempty"`
	TemporalHWM int64         `json:"temporal_hwm,omitempty"`
	RabbitCPU   time.Duration `json:"rabbit_cpu,omitempty"`
	RabbitHWM   int64         `json:"rabbit_hwm,omitempty"`
	// TemporalKernel and RabbitKernel: their kernel entries (the dev
	// stack's run only).
	TemporalKernel Kernel `json:"temporal_kernel"`
	RabbitKernel   Kernel `json:"rabbit_kernel"`
	// WorkerProcs: the worker processes of a Job with Workers > 0, apart
	// from CPU and MaxRSS (which are the child's: Temporal client,
	// scheduler, in-memory Kafka).
	WorkerProcs []WorkerProc `json:"worker_procs,omitempty"`
	// DevStack: drover as `make dev` runs it (every part a process).
	DevStack bool `json:"dev_stack,omitempty"`
	// Samples: the stack's processes read over the crawl (Job.SampleEvery).
	Samples []Sample `json:"samples,omitempty"`
	// InFlight is the most requests the contender can have open at once.
	InFlight int `json:"in_flight"`

	// Filled by the parent from the server's log.
	Pages      int `json:"pages"`      // unique pages of Web.Pages requested
	Duplicates int `json:"duplicates"` // requests beyond the first of a URL
	Missing    int `json:"missing"`
	Disallowed int `json:"disallowed"` // requests robots.txt disallows
	Requests   int `json:"requests"`
	// Connections: the connections the test web accepted (scale).
	Connections int64         `json:"connections,omitempty"`
	Span        time.Duration `json:"span"` // first to last request start
	// WebCPU: the parent's CPU while the child ran: the test web serving
	// it (and the parent waiting), outside every contender's figures.
	WebCPU time.Duration `json:"web_cpu,omitempty"`
	MinGap time.Duration `json:"min_gap,omitempty"`
	Bound  float64       `json:"bound,omitempty"` // pages/s politeness allows: hosts / delay
	// Achievable: the bound this web allows at all: its largest host needs
	// robots.txt plus its pages, each a delay apart, so no crawl's span is
	// shorter than (those requests - 1) x delay.
	Achievable float64 `json:"achievable,omitempty"`

	// Sink jobs: records stored, body bytes stored, Store latencies, and
	// what the sink left on disk (WARC).
	Records   int64         `json:"records,omitempty"`
	BodyBytes int64         `json:"body_bytes,omitempty"`
	P50       time.Duration `json:"p50,omitempty"`
	P99       time.Duration `json:"p99,omitempty"`
	DiskBytes int64         `json:"disk_bytes,omitempty"`

	// Recrawl runs: which run (1, or 2 --from run 1), what each sink took
	// from it (WARC: its files' bytes; Kafka: the keys, values and
	// headers of its records; PostgreSQL: its rows, pg_column_size), and,
	// filled by the parent from the server's log, the requests answered
	// 304 and 200 and those that carried a validator.
	Run         int              `json:"run,omitempty"`
	SinkBytes   map[string]int64 `json:"sink_bytes,omitempty"`
	Answered304 int              `json:"answered_304,omitempty"`
	Answered200 int              `json:"answered_200,omitempty"`
	Conditional int              `json:"conditional,omitempty"`
}

// TotalCPU is the CPU time of every process of the contender: its own,
// drover's other processes, Temporal and RabbitMQ.
func (r Result) TotalCPU() time.Duration {
	t := r.CPU + r.TemporalCPU + r.RabbitCPU
	for _, p := range r.WorkerProcs {
		t += p.CPU
	}
	return t
}

// PagesPerSec is unique pages over the server-side span of the crawl.
func (r Result) PagesPerSec() float64 { return perSec(float64(r.Pages), r.Span) }

// WallPagesPerSec is unique pages over the crawler's wall time.
func (r Result) WallPagesPerSec() float64 { return perSec(float64(r.Pages), r.Wall) }

// perSec is n over d, in units per second; 0 when d is not positive.
func perSec(n float64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return n / d.Seconds()
}

// RunChild runs the Job read from in and writes its Result to out; the
// bench main calls it when started with -child.
func RunChild(ctx context.Context, in io.Reader, out io.Writer) error {
	var j Job
	dec := json.NewDecoder(in)
	if err := dec.Decode(&j); err != nil {
		return fmt.Errorf("bench child: read job: %w", err)
	}
	var stop chan struct{}
	if j.StopOnEOF {
		stop = make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, io.MultiReader(dec.Buffered(), in))
			close(stop)
		}()
	}
	if j.Timeout <= 0 {
		j.Timeout = 5 * time.Minute
	}
	var (
		res Result
		err error
	)
	switch j.Kind {
	case KindDrover:
		if j.DevStack {
			res, err = runDroverDev(ctx, j)
		} else {
			res, err = runDrover(ctx, j, stop)
		}
	case KindColly:
		res, err = runColly(ctx, j)
	case KindRaw:
		res, err = runRaw(ctx, j)
	case KindScrapy:
		res, err = runScrapy(ctx, j)
	case KindSink:
		res, err = runSink(ctx, j)
	case KindRecrawl:
		res, err = runRecrawl(ctx, j, stop, out)
	default:
		return fmt.Errorf("bench child: kind %q: want %s, %s, %s, %s, %s or %s", j.Kind, KindDrover, KindColly, KindScrapy, KindRaw, KindSink, KindRecrawl)
	}
	res.Kind = j.Kind
	if err != nil {
		res.Err = err.Error()
	}
	if res.MaxRSS == 0 { // scrapy's is its python process's
		_, res.MaxRSS = selfUsage()
	}
	return json.NewEncoder(out).Encode(res)
}

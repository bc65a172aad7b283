package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/workflows"
)

// Options configures a chaos run. Zero values take the defaults.
type Options struct {
	// Hosts x PagesPerHost is the test web (default 20 x 500: 10,000 pages
	// plus host 0's extras).
	Hosts, PagesPerHost int
	// Fetchers of the campaign (default 8).
	Fetchers int
	// PerHostDelay paces the crawl (default 150 ms: about 130 pages/s over
	// 20 hosts, so that a 30 s fault falls well inside the crawl).
	PerHostDelay time.Duration
	// Outage is the length of the faults that last (default 30 s).
	Outage time.Duration
	// Trigger is the share of the web fetched before a fault (default 0.15).
	Trigger float64
	// WorkDir holds every row's state (default a temporary directory).
	WorkDir string
	// BinDir holds the worker and scheduler binaries (built there).
	BinDir string
	// Log receives progress lines (default os.Stderr).
	Log io.Writer
	// PostgresAddr is the PostgreSQL the postgres row writes to through its
	// proxy (default 127.0.0.1:5432, user postgres, database test).
	PostgresAddr string
}

func (o *Options) defaults() {
	o.Hosts = cmp.Or(o.Hosts, 20)
	o.PagesPerHost = cmp.Or(o.PagesPerHost, 500)
	o.Fetchers = cmp.Or(o.Fetchers, 8)
	o.PerHostDelay = cmp.Or(o.PerHostDelay, 150*time.Millisecond)
	o.Outage = cmp.Or(o.Outage, 30*time.Second)
	o.Trigger = cmp.Or(o.Trigger, 0.15)
	if o.Log == nil {
		o.Log = os.Stderr
	}
	o.PostgresAddr = cmp.Or(o.PostgresAddr, "127.0.0.1:5432")
}

const chaosToken = "drover-chaos-token"

// rig is one row's drover: a Temporal dev server, a scheduler and worker
// processes under a supervisor (each restarted when it dies, as `make dev`
// does), a gated Kafka, the test web, and the sink the row counts in.
type rig struct {
	opts    Options
	name    string
	dir     string
	rabbit  *RabbitNode
	sup     *devstack.Supervisor
	web     *testweb.Web
	kafka   *GatedKafka
	topic   string
	client  client.Client
	tempo   *devstack.Child
	sched   *devstack.Child // the first scheduler, the one faults hit
	scheds  []*devstack.Child
	workers []*devstack.Child

	temporalAddr string
	schedAddr    string   // the first scheduler's own address
	schedAddrs   []string // every scheduler's address
	schedMetrics []string // every scheduler's metrics URL
	// workerSched is the scheduler address worker-0 dials (through a proxy
	// when the row partitions it).
	schedProxy *Proxy
	sinks      []string
	cleanup    []func()
}

type rigSpec struct {
	workers    int // worker processes (default 2)
	schedulers int // scheduler processes (default 1)
	// seenMemTable is the schedulers' seen-store memtable (0: default).
	seenMemTable int64
	proxyWorker0 bool // worker-0 reaches the scheduler through a Proxy
}

func (r *rig) logf(format string, args ...any) {
	fmt.Fprintf(r.opts.Log, "chaos [%s] %s  %s\n", time.Now().Format("15:04:05"), r.name, fmt.Sprintf(format, args...))
}

// startRig brings a row's drover up and waits until every piece answers.
func startRig(ctx context.Context, opts Options, name string, rabbit *RabbitNode, spec rigSpec, base byte) (*rig, error) {
	r := &rig{opts: opts, name: name, dir: filepath.Join(opts.WorkDir, name), rabbit: rabbit}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			r.stop()
		}
	}()
	var err error
	if r.web, err = testweb.Start(testweb.Config{Hosts: opts.Hosts, PagesPerHost: opts.PagesPerHost, CrossHost: true, Base: base}); err != nil {
		return nil, fmt.Errorf("test web: %w", err)
	}
	r.cleanup = append(r.cleanup, func() { r.web.Close() })
	r.topic = "pages-" + name
	if r.kafka, err = StartGatedKafka(r.topic); err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	r.cleanup = append(r.cleanup, r.kafka.Close)
	r.sinks = []string{"kafka://" + r.kafka.Addr + "/" + r.topic}

	r.sup = devstack.NewSupervisor(filepath.Join(r.dir, "log"), &prefixWriter{w: opts.Log, prefix: "chaos   " + name + " "})
	tport, err := freePort()
	if err != nil {
		return nil, err
	}
	r.temporalAddr = "127.0.0.1:" + strconv.Itoa(tport)
	temporalBin, err := devstack.TemporalBinary()
	if err != nil {
		return nil, err
	}
	if r.tempo, err = r.sup.Start(devstack.ProcSpec{Name: "temporal", Path: temporalBin, StopSignal: syscall.SIGINT,
		Args: devstack.TemporalServerArgs("127.0.0.1", tport, -1, filepath.Join(r.dir, "temporal.db"))}); err != nil {
		return nil, err
	}
	if spec.schedulers == 0 {
		spec.schedulers = 1
	}
	if err := r.startSchedulers(spec.schedulers, spec.seenMemTable); err != nil {
		return nil, err
	}
	r.sched, r.schedAddr = r.scheds[0], r.schedAddrs[0]
	if spec.proxyWorker0 {
		if r.schedProxy, err = NewProxy("127.0.0.1:0", r.schedAddr); err != nil {
			return nil, err
		}
		r.cleanup = append(r.cleanup, func() { r.schedProxy.Close() })
	}
	if spec.workers == 0 {
		spec.workers = 2
	}
	if err := r.startWorkers(spec.workers); err != nil {
		return nil, err
	}
	readyCtx, cancel := context.WithTimeout(ctx, readyWithin)
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	if r.client, err = temporalnode.DialTemporal(readyCtx, client.Options{HostPort: r.temporalAddr, Logger: tlog.NewStructuredLogger(quiet)}, nil); err != nil {
		return nil, fmt.Errorf("temporal: %w", err)
	}
	if err := r.waitScheduler(readyCtx); err != nil {
		return nil, err
	}
	if err := await.Until(readyCtx, readyWithin, pollEvery, func() error { return r.workersPolling(readyCtx, spec.workers) }); err != nil {
		return nil, fmt.Errorf("workers not polling: %w", err)
	}
	ok = true
	return r, nil
}

// startSchedulers starts n scheduler processes on free ports.
func (r *rig) startSchedulers(n int, seenMemTable int64) error {
	for i := range n {
		sport, err := freePort()
		if err != nil {
			return err
		}
		mport, err := freePort()
		if err != nil {
			return err
		}
		addr, maddr := "127.0.0.1:"+strconv.Itoa(sport), "127.0.0.1:"+strconv.Itoa(mport)
		name := fmt.Sprintf("scheduler-%d", i)
		schedArgs := []string{"-listen", addr, "-name", name, "-seen", filepath.Join(r.dir, "seen", name), "-metrics-addr", maddr,
			"-seen-memtable-bytes", strconv.FormatInt(seenMemTable, 10)}
		if seenMemTable > 0 {
			// Small memtables are there to compact often: at Pebble's
			// own level 0 of 4 tables, as before the store gathered more.
			schedArgs = append(schedArgs, "-seen-l0-tables", "4")
		}
		sched, err := r.sup.Start(devstack.ProcSpec{Name: name, Path: filepath.Join(r.opts.BinDir, "scheduler"),
			Args: schedArgs,
			Env:  []string{"AMQP_URL=" + r.rabbit.URL, "DROVER_TOKEN=" + chaosToken}})
		if err != nil {
			return err
		}
		r.scheds, r.schedAddrs = append(r.scheds, sched), append(r.schedAddrs, addr)
		r.schedMetrics = append(r.schedMetrics, "http://"+maddr+"/metrics")
	}
	return nil
}

// startWorkers starts n worker processes; worker 0 goes through the
// scheduler proxy when the row has one.
func (r *rig) startWorkers(n int) error {
	for i := range n {
		addr := strings.Join(r.schedAddrs, ",")
		if i == 0 && r.schedProxy != nil {
			addr = r.schedProxy.Addr()
		}
		// SIGKILL at the end of a row: the crawl is over, and a graceful
		// stop waits out the sessions' stop timeout for nothing.
		w, err := r.sup.Start(devstack.ProcSpec{Name: fmt.Sprintf("worker-%d", i), Path: filepath.Join(r.opts.BinDir, "worker"), StopSignal: syscall.SIGKILL,
			Args: []string{"-identity", workerIdentity(i), "-metrics-addr", "127.0.0.1:0"},
			Env: []string{"DROVER_SCHEDULER=" + addr, "DROVER_TOKEN=" + chaosToken, "TEMPORAL_ADDRESS=" + r.temporalAddr,
				"TEMPORAL_NAMESPACE=default", "KAFKA_BROKERS=" + r.kafka.Addr}})
		if err != nil {
			return err
		}
		r.workers = append(r.workers, w)
	}
	return nil
}

// waitScheduler waits until every scheduler answers a control session.
func (r *rig) waitScheduler(ctx context.Context) error {
	return await.Until(ctx, readyWithin, pollEvery, func() error {
		for _, addr := range r.schedAddrs {
			actx, cancel := context.WithTimeout(ctx, 2*time.Second)
			c, err := session.Client{Token: chaosToken}.DialControl(actx, addr)
			cancel()
			if err != nil {
				return fmt.Errorf("scheduler %s: %w", addr, err)
			}
			if err := c.Close(); err != nil {
				return err
			}
		}
		return nil
	})
}

// workerIdentityPrefix starts the Temporal identity of each worker process
// of the rig.
const workerIdentityPrefix = "chaos-worker-"

// workerIdentity is the Temporal identity of worker process i, which
// Temporal shows as the worker of each activity it runs.
func workerIdentity(i int) string { return workerIdentityPrefix + strconv.Itoa(i) }

func (r *rig) workersPolling(ctx context.Context, n int) error {
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := r.client.DescribeTaskQueue(actx, workflows.FetchTaskQueue, enums.TASK_QUEUE_TYPE_ACTIVITY)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range resp.GetPollers() {
		if strings.HasPrefix(p.GetIdentity(), workerIdentityPrefix) {
			seen[p.GetIdentity()] = true
		}
	}
	if len(seen) < n {
		return fmt.Errorf("%d of %d workers polling", len(seen), n)
	}
	return nil
}

// Bounds of the rig's waits.
const (
	// pollEvery is how often a condition is checked again.
	pollEvery = 200 * time.Millisecond
	// readyWithin bounds the start of the rig's processes, each of
	// which answers in seconds on an idle machine.
	readyWithin = 2 * time.Minute
	// faultWithin bounds a fault's injection and the wait for what it
	// killed to be back.
	faultWithin = 5 * time.Minute
)

// campaignConfig is the row's campaign.
func (r *rig) campaignConfig() campaign.Config {
	return campaign.Config{
		ID: fmt.Sprintf("chaos-%s-%d", r.name, rand.IntN(1e6)),
		// Named here so that the rig knows the frontier key (ID~Run) the
		// schedulers count this run under.
		Run:          campaign.NewRun(time.Now(), rand.Uint64()),
		Seeds:        r.web.Seeds(),
		Fetchers:     r.opts.Fetchers,
		PerHostDelay: new(r.opts.PerHostDelay),
		AllowPrivate: true,
		Sinks:        r.sinks,
	}
}

// waitCampaign waits (at most within) until the campaign is closed,
// riding out a Temporal restart, and returns its final status.
func (r *rig) waitCampaign(ctx context.Context, id string, within time.Duration) (workflows.Status, error) {
	var st workflows.Status
	err := await.Until(ctx, within, pollEvery, func() error {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		d, err := r.client.DescribeWorkflowExecution(actx, id, "")
		if err != nil {
			return err
		}
		if s := d.GetWorkflowExecutionInfo().GetStatus(); s == enums.WORKFLOW_EXECUTION_STATUS_RUNNING {
			return errors.New("running")
		} else if s != enums.WORKFLOW_EXECUTION_STATUS_COMPLETED {
			return fmt.Errorf("%w: campaign %s ended %s", await.ErrFinal, id, s)
		}
		return r.client.GetWorkflow(actx, id, "").Get(actx, &st)
	})
	return st, err
}

func (r *rig) stop() {
	if r.client != nil {
		r.client.Close()
	}
	if r.sup != nil {
		r.sup.Stop()
	}
	for i := len(r.cleanup) - 1; i >= 0; i-- {
		r.cleanup[i]()
	}
}

// prefixWriter prefixes each write (one supervisor message) with a string.
type prefixWriter struct {
	w      io.Writer
	prefix string
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	if _, err := fmt.Fprintf(p.w, "%s%s", p.prefix, b); err != nil {
		return 0, err
	}
	return len(b), nil
}

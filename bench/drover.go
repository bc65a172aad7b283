package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// runDrover brings up the whole stack in this process as systest/crawl_test.go
// does (Temporal dev server as a child process, in-memory Kafka, a scheduler
// over the machine's RabbitMQ, the workers), then times one campaign of
// Fleet fetchers from ExecuteWorkflow to its result. Temporal's and
// RabbitMQ's CPU over that window are measured from /proc, apart. When stop
// is closed (the parent closed stdin, Job.StopOnEOF), the campaign gets its
// stop signal and ending "stopped" is a success. With j.Workers > 0 the
// workers are j.Workers processes of the worker binary j.WorkerBin instead,
// measured apart (Result.WorkerProcs).
func runDrover(ctx context.Context, j Job, stop <-chan struct{}) (res Result, err error) {
	core, err := startCore(ctx, j)
	if err != nil {
		return res, err
	}
	defer core.Close()
	tmp, k, topic, sched, dir := core.temporal, core.kafka, core.topic, core.sched, core.dir
	var procs []*workerProc
	if j.Workers > 0 {
		// The fleet in worker processes (./worker), the workflow too; this
		// process keeps Temporal, Kafka and the scheduler. Each process runs
		// at most its share of the fleet, so the sessions split evenly.
		if j.WorkerBin == "" {
			return res, errNoWorkerBin
		}
		procs, err = startWorkerProcs(ctx, tmp.Client(), j.WorkerBin, dir, j.Workers, (j.Fleet+j.Workers-1)/j.Workers, workerEnv{
			Scheduler: sched.Addr(), Token: session.DevToken, Temporal: tmp.Address(), Kafka: k.Addr(), AMQPURL: j.AMQPURL,
		})
		if err != nil {
			return res, err
		}
		defer stopWorkerProcs(procs)
	} else {
		w, err := temporalnode.StartWorkers(tmp.Client(), temporalnode.WorkerConfig{Identity: "bench-worker", Activities: &activities.Activities{
			Schedulers: []string{sched.Addr()}, Token: session.DevToken, KafkaBrokers: k.Addr(), Identity: "bench-worker",
		}})
		if err != nil {
			return res, err
		}
		defer w.Stop()
	}

	cfg, inFlight, err := jobCampaign(j, fmt.Sprintf("bench-%d-%d", j.Fleet, rand.IntN(1e9)), "kafka://"+k.Addr()+"/"+topic)
	if err != nil {
		return res, err
	}
	res.InFlight = inFlight

	_, port, _ := net.SplitHostPort(tmp.Address())
	temporal, rabbit := sampleProc(temporalPID(port)), sampleProc(rabbitPID())
	sampleWorkerProcs(procs)
	if j.CPUProfile != "" {
		f, err := os.Create(j.CPUProfile)
		if err != nil {
			return res, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, err
		}
		defer pprof.StopCPUProfile() // stopped below already on the normal path
	}
	cpu0, _ := selfUsage()
	start := time.Now()
	var stopper func(context.Context)
	if stop != nil {
		stopper = func(wctx context.Context) {
			select {
			case <-stop:
			case <-wctx.Done():
				return
			}
			if err := tmp.Client().SignalWorkflow(wctx, cfg.ID, "", workflows.SignalStop,
				workflows.StopSignal{Reason: "bench: the measured pages are done"}); err != nil {
				fmt.Fprintln(os.Stderr, "bench child: stop signal:", err)
			}
		}
	}
	wctx, stopWatch := context.WithCancel(ctx)
	// Named here, so that the watcher reads the scheduler's counts under
	// this run's frontier key (ID~Run).
	cfg.Run = campaign.NewRun(time.Now(), rand.Uint64())
	last := watchSchedulerStats(wctx, sched.Addr(), cfg.FrontierKey())
	st, err := runCampaign(ctx, tmp.Client(), cfg, j.Timeout, stopper)
	stopWatch()
	if ls := last(); ls.Fetched > 0 {
		fmt.Fprintf(os.Stderr, "bench: %s: the scheduler published %d URLs in %d messages, acked %d deliveries (its last reading, at %d pages)\n",
			cfg.ID, ls.Published, ls.Messages, ls.Acked, ls.Fetched)
	}
	res.Wall = time.Since(start)
	cpu1, _ := selfUsage()
	if j.CPUProfile != "" {
		pprof.StopCPUProfile()
	}
	res.CPU = cpu1 - cpu0
	res.TemporalCPU, res.TemporalHWM = temporal.delta()
	res.RabbitCPU, res.RabbitHWM = rabbit.delta()
	if len(procs) > 0 {
		res.WorkerProcs = measureWorkerProcs(procs)
		if err == nil {
			hctx, cancel := context.WithTimeout(ctx, time.Minute)
			if herr := countSessions(hctx, tmp.Client(), cfg.ID, res.WorkerProcs); herr != nil {
				fmt.Fprintln(os.Stderr, "bench child: workflow history:", herr)
			}
			cancel()
		}
	}
	res.Fetched, res.State = st.PagesFetched, st.State
	if err != nil {
		return res, fmt.Errorf("campaign %s: %w%s", cfg.ID, err, workerLogs(procs))
	}
	if st.State != campaign.StateCompleted && !(stop != nil && st.State == campaign.StateStopped) {
		return res, errors.New("campaign " + cfg.ID + " ended " + st.State + ": " + st.Reason + workerLogs(procs))
	}
	return res, nil
}

// droverCore is the part of the stack every in-process drover run shares:
// the Temporal dev server (a child process), in-memory Kafka with its
// topic, and a scheduler over the machine's RabbitMQ whose seen store (and
// the lineages' fetch history in it) lives in dir.
type droverCore struct {
	temporal *devstack.Temporal
	kafka    *devstack.Kafka
	topic    string
	sched    *node.Scheduler
	dir      string
	closers  []func()
}

// startCore starts a droverCore; Close stops it, in reverse order.
func startCore(ctx context.Context, j Job) (c *droverCore, err error) {
	c = &droverCore{}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	tbin, err := TemporalBinary()
	if err != nil {
		return c, err
	}
	if c.temporal, err = devstack.StartTemporal(ctx, devstack.TemporalOptions{BinaryPath: tbin, UIPort: -1}); err != nil {
		return c, err
	}
	c.closers = append(c.closers, func() { c.temporal.Stop() })
	c.topic = fmt.Sprintf("bench-pages-%d", rand.IntN(1e9))
	if c.kafka, err = devstack.StartKafka("127.0.0.1:0", c.topic); err != nil {
		return c, err
	}
	c.closers = append(c.closers, func() { c.kafka.Close() })
	if c.dir, err = os.MkdirTemp("", "drover-bench-"); err != nil {
		return c, err
	}
	c.closers = append(c.closers, func() { os.RemoveAll(c.dir) })
	c.sched, err = node.StartScheduler(ctx, node.SchedulerConfig{
		Server: frontier.DefaultServerConfig(), Listen: "127.0.0.1:0", AMQPURL: j.AMQPURL,
		SeenPath: c.dir + "/seen", Log: log,
	})
	if err != nil {
		return c, err
	}
	c.closers = append(c.closers, func() { c.sched.Close() })
	return c, nil
}

// Close stops what startCore started, the last first.
func (c *droverCore) Close() {
	for _, f := range slices.Backward(c.closers) {
		f()
	}
	c.closers = nil
}

// jobCampaign is the campaign a drover job runs: the job's seeds, fleet and
// per-host limits, private addresses allowed (the test webs are on
// loopback), MaxDuration the job's timeout; inFlight is how many pages it
// can have in flight at once.
func jobCampaign(j Job, id string, sinks ...string) (cfg campaign.Config, inFlight int, err error) {
	cfg = campaign.Config{
		ID:                 id,
		Seeds:              j.Seeds,
		Fetchers:           j.Fleet,
		PerHostDelay:       new(j.PerHostDelay),
		PerHostConcurrency: j.PerHostConcurrency,
		AllowPrivate:       true,
		MaxDuration:        j.Timeout,
		Sinks:              sinks,
		QueueType:          j.QueueType,
		Scope:              j.Scope,
	}
	eff := cfg.WithDefaults()
	if err := eff.Validate(); err != nil {
		return cfg, 0, err
	}
	return cfg, min(eff.Fetchers*eff.FetcherConcurrency, len(j.Seeds)*eff.PerHostConcurrency), nil
}

// runCampaign starts cfg's Campaign workflow on c and waits for its end, at
// most timeout and a minute (MaxDuration ends the campaign itself; the extra
// minute lets it say so). during, if not nil, runs in a goroutine of its own
// meanwhile, with the context of the wait.
func runCampaign(ctx context.Context, c client.Client, cfg campaign.Config, timeout time.Duration, during func(context.Context)) (workflows.Status, error) {
	var st workflows.Status
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	if err != nil {
		return st, err
	}
	wctx, cancel := context.WithTimeout(ctx, timeout+time.Minute)
	defer cancel()
	if during != nil {
		go during(wctx)
	}
	err = run.Get(wctx, &st)
	return st, err
}

// watchSchedulerStats reads the campaign's stats from the scheduler every
// 200 ms until ctx ends; last returns the latest reading (the campaign's
// closing takes its counters away, so the last one before it is kept).
func watchSchedulerStats(ctx context.Context, addr, id string) (last func() session.Stats) {
	var mu sync.Mutex
	var cur session.Stats
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
			st, err := session.Client{Token: session.DevToken}.CampaignStats(ctx, []string{addr}, id)
			if err == nil && st.Fetched >= cur.Fetched {
				mu.Lock()
				cur = st
				mu.Unlock()
			}
		}
	}()
	return func() session.Stats {
		mu.Lock()
		defer mu.Unlock()
		return cur
	}
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/session"
)

// runDroverDev measures drover the way a user runs it (issue 15): the dev
// stack of `make dev` (devstack.StartStack: Temporal with its SQLite file,
// the Kafka process with its fsynced log, the scheduler and the worker
// binaries, each a process of its own) on free ports and a temporary data
// directory, and one campaign started as `starter start --fetchers N
// --per-host-concurrency C --per-host-delay D` starts it (the dev stack's
// Kafka topic as sink). Every process's CPU comes from /proc/PID/stat over
// the crawl window. With j.PerfOut set, `perf record` samples every
// process of the stack (worker, scheduler, Kafka, Temporal, and RabbitMQ
// when found) over that window into j.PerfOut. With j.SampleEvery set,
// every process's CPU and RSS and the scheduler's count of pages fetched
// are read at the campaign's start, every j.SampleEvery and at its end
// (Result.Samples).
func runDroverDev(ctx context.Context, j Job) (res Result, err error) {
	res.DevStack = true
	root, err := RepoRoot()
	if err != nil {
		return res, err
	}
	// StartStack finds bin/temporal and builds the binaries from the
	// working directory's module; this child process is the bench's own.
	if err := os.Chdir(root); err != nil {
		return res, err
	}
	dir, err := os.MkdirTemp("", "drover-bench-dev-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	ports, err := freePorts(5)
	if err != nil {
		return res, err
	}
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	so := devstack.StackOptions{
		DataDir: filepath.Join(dir, "data"), TemporalPort: ports[0], UIPort: -1,
		KafkaAddr: addr(ports[1]), SchedulerAddr: addr(ports[2]), AMQPURL: j.AMQPURL,
		BinDir: filepath.Join(dir, "bin"), Out: os.Stderr, Log: quiet,
		SchedulerArgs: j.SchedulerArgs, SchedulerEnv: j.SchedulerEnv, WorkerEnv: j.WorkerEnv,
	}
	if j.HeapDir != "" {
		so.SchedulerArgs = slices.Concat(j.SchedulerArgs, []string{"-pprof-addr", addr(ports[3])})
		so.WorkerArgs = []string{"-pprof-addr", addr(ports[4])}
	}
	st, err := devstack.StartStack(ctx, so)
	if err != nil {
		return res, err
	}
	defer st.Stop()

	cfg, inFlight, err := jobCampaign(j, fmt.Sprintf("bench-dev-%d-%d", j.Fleet, rand.IntN(1e9)))
	if err != nil {
		return res, err
	}
	res.InFlight = inFlight
	if len(cfg.Seeds) > campaign.MaxInlineSeeds {
		if cfg, err = streamSeeds(ctx, cfg, addr(ports[2])); err != nil {
			return res, err
		}
	}
	res.Config = fmt.Sprintf("make dev's stack (temporal, kafka with fsynced log, scheduler, worker: 4 processes); starter start --fetchers %d --per-host-concurrency %d --per-host-delay %s --allow-private, sink the dev topic",
		j.Fleet, j.PerHostConcurrency, j.PerHostDelay)
	if cfg.SeedsFile != "" {
		res.Config += fmt.Sprintf("; its %d seeds streamed to the scheduler before the start, as the starter streams more than %d", len(j.Seeds), campaign.MaxInlineSeeds)
		if len(cfg.Scope) > 0 {
			res.Config += fmt.Sprintf(", --scope %s", strings.Join(cfg.Scope, " --scope "))
		}
	}

	procs := []struct {
		name string
		c    *devstack.Child
	}{{"worker", st.Worker}, {"scheduler", st.Scheduler}, {"kafka", st.Kafka}}
	samples := make([]otherProc, len(procs))
	for i, p := range procs {
		if samples[i] = sampleProc(p.c.PID()); samples[i].pid == 0 {
			return res, fmt.Errorf("dev stack: %s is not running", p.name)
		}
	}
	temporal := sampleProc(st.Temporal.PID())
	rabbit := sampleProc(rabbitPID())
	var perf *exec.Cmd
	if j.PerfOut != "" {
		pids := []int{temporal.pid}
		for _, s := range samples {
			pids = append(pids, s.pid)
		}
		if rabbit.pid != 0 {
			pids = append(pids, rabbit.pid)
		}
		if perf, err = startPerf(j.PerfOut, j.PerfEvents, pids...); err != nil {
			return res, err
		}
	}
	var sampler *stackSampler
	if j.SampleEvery > 0 {
		// Named here (unless streamSeeds did), so that the sampler reads
		// the scheduler's counts under this run's frontier key (ID~Run).
		if cfg.Run == "" {
			cfg.Run = campaign.NewRun(time.Now(), rand.Uint64())
		}
		targets := []sampleTarget{
			{"scheduler", st.Scheduler.PID}, {"worker", st.Worker.PID}, {"kafka", st.Kafka.PID},
			{"temporal", st.Temporal.PID}, {"rabbitmq", func() int { return rabbit.pid }},
		}
		var also func(time.Duration)
		if j.HeapDir != "" {
			also = heapProfiles(j.HeapDir, map[string]string{"scheduler": addr(ports[3]), "worker": addr(ports[4])})
		}
		sampler = startSampler(ctx, j.SampleEvery, targets, schedulerFetched(addr(ports[2]), cfg.FrontierKey()), also)
	}
	cpu0, _ := selfUsage()
	start := time.Now()
	status, err := runCampaign(ctx, st.Client(), cfg, j.Timeout, nil)
	res.Wall = time.Since(start)
	cpu1, _ := selfUsage()
	if perf != nil {
		stopPerf(perf)
	}
	if sampler != nil {
		res.Samples = sampler.stop()
	}
	res.CPU = cpu1 - cpu0
	for i, p := range procs {
		cpu, hwm := samples[i].delta()
		res.WorkerProcs = append(res.WorkerProcs, WorkerProc{Identity: p.name, CPU: cpu, HWM: hwm, Kernel: samples[i].kernel()})
	}
	res.TemporalCPU, res.TemporalHWM = temporal.delta()
	res.RabbitCPU, res.RabbitHWM = rabbit.delta()
	res.TemporalKernel, res.RabbitKernel = temporal.kernel(), rabbit.kernel()
	res.Fetched, res.State = status.PagesFetched, status.State
	for _, p := range procs {
		if n := p.c.Starts(); n > 1 {
			err = errors.Join(err, fmt.Errorf("dev stack: %s restarted %d times (log %s)", p.name, n-1, p.c.LogPath()))
		}
	}
	if err != nil {
		return res, fmt.Errorf("campaign %s: %w", cfg.ID, err)
	}
	if status.State != campaign.StateCompleted {
		return res, errors.New("campaign " + cfg.ID + " ended " + status.State + ": " + status.Reason)
	}
	return res, nil
}

// streamSeeds queues cfg's seeds on the scheduler at addr before the
// campaign starts, as `starter start` does with more than
// campaign.MaxInlineSeeds of them: the run is named, the seeds are
// streamed into its frontier, and the config carries where they came
// from and, without scope regexes, their hosts (at most
// campaign.MaxSeedHosts) instead of the seeds.
func streamSeeds(ctx context.Context, cfg campaign.Config, addr string) (campaign.Config, error) {
	seeds := cfg.Seeds
	cfg.Seeds = nil
	cfg.SeedsFile = fmt.Sprintf("the %d seeds of the config", len(seeds))
	cfg.Run = campaign.NewRun(time.Now(), rand.Uint64())
	hosts := map[string]bool{}
	o := seedfile.Options{DropParams: cfg.DropParams}
	if len(cfg.Scope) == 0 {
		o.Hosts, o.MaxHosts = hosts, campaign.MaxSeedHosts
	}
	sd := &seedfile.Seeder{Config: cfg, Addrs: []string{addr}, Dial: func(ctx context.Context, addr string) (seedfile.Control, error) {
		return session.Client{Token: session.DevToken}.DialControl(ctx, addr)
	}}
	defer sd.Close()
	counts, err := seedfile.Stream(ctx, strings.NewReader(strings.Join(seeds, "\n")), o, sd.Send)
	switch {
	case errors.Is(err, seedfile.ErrTooManyHosts):
		return cfg, fmt.Errorf("seeds on more than %d hosts: give the job scope regexes (Job.Scope), as a user gives starter start --scope", campaign.MaxSeedHosts)
	case err != nil:
		return cfg, fmt.Errorf("streaming %d seeds to %s: %w", len(seeds), addr, err)
	case counts.Seeded != int64(len(seeds)):
		return cfg, fmt.Errorf("streamed %d seeds, %d queued (%d invalid, %d refused, %d known)", len(seeds), counts.Seeded, counts.Invalid, counts.Refused, counts.Known)
	}
	cfg.SeedHosts = slices.Sorted(maps.Keys(hosts))
	return cfg, nil
}

// freePorts returns n distinct free TCP ports of 127.0.0.1 (free when
// asked: the listeners are closed before the ports are used).
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startPerf samples the given processes' stacks (perf record -g) into out,
// or records the given events (perf record -e) when events is set.
func startPerf(out, events string, pids ...int) (*exec.Cmd, error) {
	list := ""
	for i, p := range pids {
		if i > 0 {
			list += ","
		}
		list += strconv.Itoa(p)
	}
	args := []string{"record", "-F", "499", "-g", "-o", out, "-p", list}
	if events != "" {
		args = []string{"record", "-g", "-e", events, "-o", out, "-p", list}
	}
	cmd := exec.Command("perf", args...)
	cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf record: %w", err)
	}
	return cmd, nil
}

// stopPerf ends perf record (SIGINT makes it write its file) and waits.
func stopPerf(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

package chaos

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/metrics"
)

// Fault is one row of the table: something broken once, alone, in the
// middle of a crawl, at a moment when it hits work in flight.
type Fault struct {
	Name string
	// What the fault does, for the table.
	What string
	// Sink the row counts in (sinkKafka when empty).
	Sink string
	spec rigSpec
	// Trigger overrides Options.Trigger.
	Trigger float64
	// needs is what must be in flight just before the fault (verdict).
	needs need
	// pick, when set, names the worker the fault hits, from the identities
	// of the workers running started FetchSessions and their counts.
	pick func(sessions map[string]int) string
	// ready, when set, is a further condition of the moment of the fault
	// (a compaction running) that may hold for less time than a
	// measurement takes. It is checked just before the fault, from one
	// scrape of the scheduler's metrics, which also refreshes m's leases in
	// flight; the rest of m is at most remeasureEvery old.
	ready func(ctx context.Context, r *rig, m *Moment) error
	// inject breaks something and returns once the fault is over: start is
	// when it began, end when the broken piece answered again (a restart)
	// or the outage ended. m is the moment measured just before.
	inject func(ctx context.Context, r *rig, s *sinks, m Moment) (start, end time.Time, note string, err error)
}

// sinks holds the row's non-Kafka sink, when it has one.
type sinks struct {
	pg   *pgSink
	warc *warcSink
}

// Faults are the rows of `make chaos`, most valuable first. Every row
// needs a lease in flight at the scheduler: the crawl is politeness-bound,
// its leases go out in waves, one per host every per-host delay, and come
// back within tens of milliseconds, so a moment picked by the page count
// alone mostly falls between two waves.
func Faults() []Fault {
	return []Fault{
		{Name: "worker-kill", What: "SIGKILL the worker running the most fetcher sessions (of 2)",
			needs: needLeases | needWorker, pick: busiestWorker, inject: killWorker},
		{Name: "scheduler-kill", What: "SIGKILL the scheduler process", needs: needLeases, inject: killScheduler},
		{Name: "rabbitmq-kill", What: "SIGKILL the private RabbitMQ node, start it again", needs: needLeases, inject: killRabbit},
		{Name: "temporal-kill", What: "SIGKILL the Temporal dev server, start it again on its db", needs: needLeases | needSessions, inject: killTemporal},
		{Name: "kafka-outage", What: "Kafka unreachable (gated listener)", needs: needLeases, inject: kafkaOutage},
		{Name: "postgres-outage", What: "PostgreSQL sink unreachable (proxy cuts)", Sink: sinkPostgres, needs: needLeases, inject: postgresOutage},
		{Name: "partition", What: "worker <-> scheduler partition (TCP proxy holds traffic)", spec: rigSpec{workers: 1, proxyWorker0: true},
			needs: needLeases | needWorker, pick: func(map[string]int) string { return workerIdentity(0) }, inject: partition},
		{Name: "warc-disk-full", What: "WARC directory's tmpfs full", Sink: sinkWARC, needs: needLeases, inject: warcFull},
		{Name: "scheduler-kill-compacting", What: "SIGKILL the scheduler while its seen store compacts", Trigger: 0.3,
			spec: rigSpec{seenMemTable: compactingMemTable}, needs: needLeases, ready: compacting, inject: killSchedulerCompacting},
	}
}

// restartOf waits until c was started again and answers (ready).
func restartOf(ctx context.Context, c *devstack.Child, starts int, ready func(context.Context) error) (time.Time, error) {
	err := await.Until(ctx, faultWithin, pollEvery, func() error {
		if c.Starts() <= starts {
			return fmt.Errorf("%s not restarted", c.Name())
		}
		if ready != nil {
			return ready(ctx)
		}
		return nil
	})
	return time.Now(), err
}

func kill(c *devstack.Child) (int, time.Time, error) {
	starts, pid := c.Starts(), c.PID()
	if pid == 0 {
		return 0, time.Time{}, fmt.Errorf("%s is not running", c.Name())
	}
	return starts, time.Now(), syscall.Kill(pid, syscall.SIGKILL)
}

// killWorker SIGKILLs the worker the moment named (m.Worker), which ran
// started FetchSessions.
func killWorker(ctx context.Context, r *rig, _ *sinks, m Moment) (time.Time, time.Time, string, error) {
	var w *devstack.Child
	for i, c := range r.workers {
		if workerIdentity(i) == m.Worker && m.Sessions[m.Worker] > 0 {
			w = c
		}
	}
	if w == nil {
		return time.Now(), time.Now(), "", fmt.Errorf("no worker of the rig runs a fetcher session (started: %v)", m.Sessions)
	}
	starts, start, err := kill(w)
	if err != nil {
		return start, start, "", err
	}
	end, err := restartOf(ctx, w, starts, nil)
	return start, end, fmt.Sprintf("killed %s, which ran %d of the %d sessions started; end = worker restarted", m.Worker, m.Sessions[m.Worker], m.sessions()), err
}

func killScheduler(ctx context.Context, r *rig, _ *sinks, _ Moment) (time.Time, time.Time, string, error) {
	starts, start, err := kill(r.sched)
	if err != nil {
		return start, start, "", err
	}
	end, err := restartOf(ctx, r.sched, starts, r.waitScheduler)
	return start, end, "end = restarted scheduler answers", err
}

// compactingMemTable is the seen store's memtable in the compaction row:
// 64 KiB flushes every couple of thousand marks, so that the store
// flushes and compacts many times in a 10,000-page crawl (Pebble's default
// 4 MB would not flush once).
const compactingMemTable = 64 << 10

// compacting says whether the scheduler's
// drover_scheduler_seen_store_compactions shows a compaction running, and
// sets m's leases in flight and pages missing from the same scrape's
// drover_scheduler_leases_in_flight of the campaign and the web.
func compacting(ctx context.Context, r *rig, m *Moment) error {
	const running = "drover_scheduler_seen_store_compactions"
	leases := fmt.Sprintf("drover_scheduler_leases_in_flight{campaign=%q}", m.ID)
	v, err := metrics.ScrapeGauges(ctx, r.schedMetrics[0], running, leases)
	if err != nil {
		return err
	}
	m.Stats.InFlight, m.Missing = int64(v[leases]), len(r.web.Missing())
	if v[running] == 0 {
		return errors.New("no seen-store compaction running")
	}
	return nil
}

// killSchedulerCompacting SIGKILLs the scheduler; its metrics have just
// shown its seen store compacting.
func killSchedulerCompacting(ctx context.Context, r *rig, s *sinks, m Moment) (time.Time, time.Time, string, error) {
	start, end, _, err := killScheduler(ctx, r, s, m)
	return start, end, fmt.Sprintf("killed a few ms after the scheduler's metrics showed a compaction running; memtable %d KiB", compactingMemTable>>10), err
}

func killRabbit(ctx context.Context, r *rig, _ *sinks, _ Moment) (time.Time, time.Time, string, error) {
	starts := r.rabbit.Starts()
	start := time.Now()
	if err := r.rabbit.Kill(); err != nil {
		return start, start, "", err
	}
	err := await.Until(ctx, faultWithin, pollEvery, func() error {
		if r.rabbit.Starts() <= starts {
			return fmt.Errorf("RabbitMQ not restarted")
		}
		return r.rabbit.WaitUp(ctx)
	})
	return start, time.Now(), "end = restarted node accepts AMQP", err
}

func killTemporal(ctx context.Context, r *rig, _ *sinks, _ Moment) (time.Time, time.Time, string, error) {
	starts, start, err := kill(r.tempo)
	if err != nil {
		return start, start, "", err
	}
	end, err := restartOf(ctx, r.tempo, starts, func(ctx context.Context) error { return devstack.CheckTemporal(ctx, r.temporalAddr) })
	return start, end, "end = restarted server answers", err
}

// outage holds a fault for Options.Outage.
func outage(ctx context.Context, r *rig, down, up func() error) (time.Time, time.Time, error) {
	start := time.Now()
	if err := down(); err != nil {
		return start, start, err
	}
	select {
	case <-ctx.Done():
	case <-time.After(r.opts.Outage):
	}
	err := up()
	return start, time.Now(), err
}

func kafkaOutage(ctx context.Context, r *rig, _ *sinks, _ Moment) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, func() error { r.kafka.SetDown(true); return nil }, func() error { r.kafka.SetDown(false); return nil })
	return start, end, "", err
}

func postgresOutage(ctx context.Context, r *rig, s *sinks, _ Moment) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, func() error { s.pg.proxy.Cut(); return nil }, func() error { s.pg.proxy.Heal(); return nil })
	return start, end, "", err
}

func partition(ctx context.Context, r *rig, _ *sinks, _ Moment) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, func() error { r.schedProxy.Partition(); return nil }, func() error { r.schedProxy.Heal(); return nil })
	return start, end, "1 worker, its sessions through a proxy that holds all bytes (not netns: the test web is on loopback)", err
}

func warcFull(ctx context.Context, r *rig, s *sinks, _ Moment) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, s.warc.fill, s.warc.free)
	return start, end, "tmpfs of 256 MB filled to ENOSPC", err
}

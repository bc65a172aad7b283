package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
)

// Fault is one row of the table: something broken once, alone, in the
// middle of a crawl.
type Fault struct {
	Name string
	// What the fault does, for the table.
	What string
	// Sink the row counts in (sinkKafka when empty).
	Sink string
	spec rigSpec
	// Trigger overrides Options.Trigger.
	Trigger float64
	// await, when set, waits after the trigger for the moment the fault
	// needs (a compaction running), before the counts of the fault start.
	await func(ctx context.Context, r *rig) error
	// inject breaks something and returns once the fault is over: start is
	// when it began, end when the broken piece answered again (a restart)
	// or the outage ended.
	inject func(ctx context.Context, r *rig, s *sinks) (start, end time.Time, note string, err error)
}

// sinks holds the row's non-Kafka sink, when it has one.
type sinks struct {
	pg   *pgSink
	warc *warcSink
}

// Faults are the rows of `make chaos`, most valuable first.
func Faults() []Fault {
	return []Fault{
		{Name: "worker-kill", What: "SIGKILL a worker process (of 2)", inject: killWorker},
		{Name: "scheduler-kill", What: "SIGKILL the scheduler process", inject: killScheduler},
		{Name: "rabbitmq-kill", What: "SIGKILL the private RabbitMQ node, start it again", inject: killRabbit},
		{Name: "temporal-kill", What: "SIGKILL the Temporal dev server, start it again on its db", inject: killTemporal},
		{Name: "kafka-outage", What: "Kafka unreachable (gated listener)", inject: kafkaOutage},
		{Name: "postgres-outage", What: "PostgreSQL sink unreachable (proxy cuts)", Sink: sinkPostgres, inject: postgresOutage},
		{Name: "partition", What: "worker <-> scheduler partition (TCP proxy holds traffic)", spec: rigSpec{workers: 1, proxyWorker0: true}, inject: partition},
		{Name: "warc-disk-full", What: "WARC directory's tmpfs full", Sink: sinkWARC, inject: warcFull},
		{Name: "scheduler-kill-compacting", What: "SIGKILL the scheduler while its seen store compacts", Trigger: 0.3,
			spec: rigSpec{seenMemTable: compactingMemTable}, await: awaitCompaction, inject: killSchedulerCompacting},
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

func killWorker(ctx context.Context, r *rig, _ *sinks) (time.Time, time.Time, string, error) {
	w := r.workers[len(r.workers)-1]
	starts, start, err := kill(w)
	if err != nil {
		return start, start, "", err
	}
	end, err := restartOf(ctx, w, starts, nil)
	return start, end, "end = worker restarted; the other worker kept fetching", err
}

func killScheduler(ctx context.Context, r *rig, _ *sinks) (time.Time, time.Time, string, error) {
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

// awaitCompaction waits until the scheduler's
// drover_scheduler_seen_store_compactions says a compaction runs.
func awaitCompaction(ctx context.Context, r *rig) error {
	// Scraped every 2 ms: a compaction may be brief, and the fault must
	// land while one runs.
	polls := 0
	err := await.Until(ctx, 2*time.Minute, 2*time.Millisecond, func() error {
		polls++
		n, err := scrapeGauge(ctx, r.schedMetrics[0], "drover_scheduler_seen_store_compactions")
		if err == nil && n == 0 {
			err = errors.New("no compaction running")
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("no seen-store compaction seen (%d scrapes): %w", polls, err)
	}
	r.logf("a seen-store compaction runs (scrape %d)", polls)
	return nil
}

// killSchedulerCompacting SIGKILLs the scheduler; awaitCompaction has
// just seen its seen store compacting.
func killSchedulerCompacting(ctx context.Context, r *rig, s *sinks) (time.Time, time.Time, string, error) {
	start, end, _, err := killScheduler(ctx, r, s)
	return start, end, fmt.Sprintf("killed a few ms after the scheduler's metrics showed a compaction running; memtable %d KiB", compactingMemTable>>10), err
}

// scrapeGauge reads one unlabelled sample from a Prometheus text endpoint.
func scrapeGauge(ctx context.Context, url, name string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no %s", url, name)
}

func killRabbit(ctx context.Context, r *rig, _ *sinks) (time.Time, time.Time, string, error) {
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

func killTemporal(ctx context.Context, r *rig, _ *sinks) (time.Time, time.Time, string, error) {
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

func kafkaOutage(ctx context.Context, r *rig, _ *sinks) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, func() error { r.kafka.SetDown(true); return nil }, func() error { r.kafka.SetDown(false); return nil })
	return start, end, "", err
}

func postgresOutage(ctx context.Context, r *rig, s *sinks) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, func() error { s.pg.proxy.Cut(); return nil }, func() error { s.pg.proxy.Heal(); return nil })
	return start, end, "", err
}

func partition(ctx context.Context, r *rig, _ *sinks) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, func() error { r.schedProxy.Partition(); return nil }, func() error { r.schedProxy.Heal(); return nil })
	return start, end, "1 worker, its sessions through a proxy that holds all bytes (not netns: the test web is on loopback)", err
}

func warcFull(ctx context.Context, r *rig, s *sinks) (time.Time, time.Time, string, error) {
	start, end, err := outage(ctx, r, s.warc.fill, s.warc.free)
	return start, end, "tmpfs of 256 MB filled to ENOSPC", err
}

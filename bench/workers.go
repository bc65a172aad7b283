package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/workflows"
)

// WorkerProc is what one worker process (the ./worker binary) of a drover
// run used: CPU (utime + stime from /proc/PID/stat) over the crawl window,
// peak RSS (VmHWM) at its end, and the FetchSession activities it ran (from
// the workflow's history: the identity on each ActivityTaskStarted).
type WorkerProc struct {
	Identity string        `json:"identity"`
	CPU      time.Duration `json:"cpu"`
	HWM      int64         `json:"hwm"`
	Kernel   Kernel        `json:"kernel"`
	Sessions int           `json:"sessions"`
	// Workflow: this process ran the Campaign workflow's tasks.
	Workflow bool `json:"workflow,omitempty"`
}

// buildWorker builds ./worker into dir, as the node tests do.
func buildWorker(ctx context.Context, dir string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "worker"), devstack.Build(ctx, root, dir, "worker")
}

// workerProc is a running worker process.
type workerProc struct {
	*devstack.Proc
	cpu otherProc
}

// workerEnv is what a worker process needs to join the child's stack.
type workerEnv struct {
	Scheduler, Token, Temporal, Kafka, AMQPURL string
}

// startWorkerProcs starts n worker processes (bin -identity bench-worker-i
// -max-sessions maxSessions), their output in dir, and waits until every
// one polls both the campaign and the fetch task queue.
func startWorkerProcs(ctx context.Context, c client.Client, bin, dir string, n, maxSessions int, env workerEnv) ([]*workerProc, error) {
	var procs []*workerProc
	fail := func(err error) ([]*workerProc, error) {
		stopWorkerProcs(procs)
		return nil, err
	}
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("bench-worker-%d", i+1)
		p, err := devstack.StartProc(devstack.ProcSpec{Name: ids[i], Path: bin,
			Args: []string{"-identity", ids[i], "-max-sessions", fmt.Sprint(maxSessions), "-metrics-addr", "127.0.0.1:0"},
			Env: []string{
				"DROVER_SCHEDULER=" + env.Scheduler,
				"DROVER_TOKEN=" + env.Token,
				"TEMPORAL_ADDRESS=" + env.Temporal,
				"KAFKA_BROKERS=" + env.Kafka,
				"AMQP_URL=" + env.AMQPURL,
			}}, dir)
		if err != nil {
			return fail(err)
		}
		procs = append(procs, &workerProc{Proc: p})
	}
	err := await.Until(ctx, workersUpWithin, 100*time.Millisecond, func() error {
		for _, p := range procs {
			if !p.Alive() {
				return fmt.Errorf("%w: %s exited at start (%v): %s", await.ErrFinal, p.Name(), p.Err(), p.Tail(5))
			}
		}
		return pollersUp(ctx, c, ids)
	})
	if err != nil {
		return fail(fmt.Errorf("worker processes not polling: %w", err))
	}
	return procs, nil
}

// workersUpWithin bounds the wait for the worker processes to poll.
const workersUpWithin = 30 * time.Second

// pollersUp says whether every identity polls the campaign task queue
// (workflow tasks) and the fetch task queue (activity tasks).
func pollersUp(ctx context.Context, c client.Client, ids []string) error {
	for _, q := range []struct {
		name string
		typ  enumspb.TaskQueueType
	}{{workflows.TaskQueue, enumspb.TASK_QUEUE_TYPE_WORKFLOW}, {workflows.FetchTaskQueue, enumspb.TASK_QUEUE_TYPE_ACTIVITY}} {
		dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := c.DescribeTaskQueue(dctx, q.name, q.typ)
		cancel()
		if err != nil {
			return err
		}
		var seen []string
		for _, p := range resp.GetPollers() {
			seen = append(seen, p.GetIdentity())
		}
		for _, id := range ids {
			if !slices.Contains(seen, id) {
				return fmt.Errorf("%s not polling %s (pollers %v)", id, q.name, seen)
			}
		}
	}
	return nil
}

// sample starts each process's CPU delta.
func sampleWorkerProcs(procs []*workerProc) {
	for _, p := range procs {
		p.cpu = sampleProc(p.PID())
	}
}

// measure returns each process's CPU since sampleWorkerProcs and its VmHWM.
func measureWorkerProcs(procs []*workerProc) []WorkerProc {
	out := make([]WorkerProc, len(procs))
	for i, p := range procs {
		out[i].Identity = p.Name()
		out[i].CPU, out[i].HWM = p.cpu.delta()
	}
	return out
}

// stopWorkerProcs stops the processes together: SIGTERM (the worker stops
// its Temporal workers, letting sessions report), and SIGKILL for what
// still runs after 15 s.
func stopWorkerProcs(procs []*workerProc) {
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() { p.Stop(15 * time.Second) })
	}
	wg.Wait()
}

// workerLogs is the tail of every worker's log, for an error.
func workerLogs(procs []*workerProc) string {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "\n--- %s:\n%s", p.Name(), p.Tail(10))
	}
	return b.String()
}

// countSessions fills each WorkerProc's Sessions (FetchSession activities
// started by that identity) and Workflow (it completed workflow tasks) from
// the workflow's history.
func countSessions(ctx context.Context, c client.Client, workflowID string, procs []WorkerProc) error {
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	activityType := map[int64]string{}
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return err
		}
		var id string
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			activityType[ev.GetEventId()] = ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
			continue
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a := ev.GetActivityTaskStartedEventAttributes()
			if activityType[a.GetScheduledEventId()] != workflows.FetchSessionActivity {
				continue
			}
			id = a.GetIdentity()
			for i := range procs {
				if procs[i].Identity == id {
					procs[i].Sessions++
				}
			}
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			id = ev.GetWorkflowTaskCompletedEventAttributes().GetIdentity()
			for i := range procs {
				if procs[i].Identity == id {
					procs[i].Workflow = true
				}
			}
		}
	}
	return nil
}

var errNoWorkerBin = errors.New("drover job with Workers > 0 but no WorkerBin")

package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

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
	Sessions int           `json:"sessions"`
	// Workflow: this process ran the Campaign workflow's tasks.
	Workflow bool `json:"workflow,omitempty"`
}

// buildWorker builds ./worker into dir, as node/procs_test.go does.
func buildWorker(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "worker")
	return bin, goBuild(ctx, "./worker", bin)
}

// workerProc is a running worker process.
type workerProc struct {
	identity string
	cmd      *exec.Cmd
	log      string
	exited   chan struct{}
	err      error // valid once exited is closed
	cpu      otherProc
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
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("bench-worker-%d", i)
		logPath := filepath.Join(dir, id+".log")
		f, err := os.Create(logPath)
		if err != nil {
			return fail(err)
		}
		cmd := exec.Command(bin, "-identity", id, "-max-sessions", fmt.Sprint(maxSessions), "-metrics-addr", "127.0.0.1:0")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(),
			"DROVER_SCHEDULER="+env.Scheduler,
			"DROVER_TOKEN="+env.Token,
			"TEMPORAL_ADDRESS="+env.Temporal,
			"KAFKA_BROKERS="+env.Kafka,
			"AMQP_URL="+env.AMQPURL,
		)
		cmd.Stdout, cmd.Stderr = f, f
		// Killed with the bench child if the parent kills it.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			f.Close()
			return fail(fmt.Errorf("start %s: %w", id, err))
		}
		p := &workerProc{identity: id, cmd: cmd, log: logPath, exited: make(chan struct{})}
		go func() {
			p.err = cmd.Wait()
			f.Close()
			close(p.exited)
		}()
		procs = append(procs, p)
	}
	ids := make([]string, n)
	for i, p := range procs {
		ids[i] = p.identity
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, p := range procs {
			select {
			case <-p.exited:
				return fail(fmt.Errorf("%s exited at start (%v): %s", p.identity, p.err, tailFile(p.log, 5)))
			default:
			}
		}
		err := pollersUp(ctx, c, ids)
		if err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fail(fmt.Errorf("worker processes not polling after 30s: %w", err))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return procs, nil
}

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
		p.cpu = sampleProc(p.cmd.Process.Pid)
	}
}

// measure returns each process's CPU since sampleWorkerProcs and its VmHWM.
func measureWorkerProcs(procs []*workerProc) []WorkerProc {
	out := make([]WorkerProc, len(procs))
	for i, p := range procs {
		out[i].Identity = p.identity
		out[i].CPU, out[i].HWM = p.cpu.delta()
	}
	return out
}

// stopWorkerProcs sends SIGTERM (the worker stops its Temporal workers,
// letting sessions report) and SIGKILLs what still runs after 15 s.
func stopWorkerProcs(procs []*workerProc) {
	for _, p := range procs {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
}

// workerLogs is the tail of every worker's log, for an error.
func workerLogs(procs []*workerProc) string {
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "\n--- %s:\n%s", p.identity, tailFile(p.log, 10))
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

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

var errNoWorkerBin = errors.New("drover job with Workers > 0 but no WorkerBin")

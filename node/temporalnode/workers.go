// Package temporalnode wires a drover process's Temporal side: the two
// Temporal workers that host the Campaign workflow, its activities and the
// FetchSession activities, and the dial that waits for the server.
package temporalnode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/workflows"
)

// Activities are the activities a worker hosts, under the names in
// workflows/names.go; *activities.Activities is the implementation.
// temporalnode takes them by interface so that a process that only runs a
// scheduler does not link the fetcher and the sinks.
type Activities interface {
	Seed(context.Context, workflows.SeedInput) (workflows.SeedResult, error)
	Monitor(context.Context, workflows.MonitorInput) (workflows.MonitorResult, error)
	Close(context.Context, workflows.CloseInput) (workflows.CloseResult, error)
	Notify(context.Context, workflows.NotifyInput) error
	FetchSession(context.Context, workflows.FetchSessionInput) (workflows.SessionCounters, error)
	EndSessions(context.Context, workflows.EndSessionsInput) (workflows.EndSessionsResult, error)
	SetRules(context.Context, workflows.RulesInput) (workflows.RulesOutput, error)
	SeedFile(context.Context, workflows.SeedFileInput) (seedfile.Counts, error)
}

// WorkerConfig configures the Temporal workers of a process.
type WorkerConfig struct {
	Activities Activities
	// Identity is the workers' identity, which Temporal shows with each
	// activity (`starter status`); empty takes the SDK's default.
	Identity string
	// MaxSessions bounds the FetchSession activities this process runs.
	MaxSessions int
}

// Workers are a process's two Temporal workers: one for the workflow and
// its small activities, one for the long FetchSession activities.
type Workers struct {
	campaign, fetch worker.Worker
}

// HeartbeatThrottle is the workers' MaxHeartbeatThrottleInterval: at most
// one heartbeat per activity reaches the server in it, so it also bounds
// how late a cancellation reaches a session whose scheduler could not end
// it (EndSessions failed).
const HeartbeatThrottle = 5 * time.Second

// StartWorkers registers the workflow and activities and starts polling.
func StartWorkers(c client.Client, cfg WorkerConfig) (*Workers, error) {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = 256
	}
	a := cfg.Activities
	if a == nil {
		return nil, errors.New("start workers: no activities")
	}
	opts := worker.Options{
		Identity: cfg.Identity,
		// A heartbeat costs the Temporal server a write to the
		// workflow's mutable state; 8 fetchers at 500 ms cost it 0.04
		// cores whatever they fetch. A pause, a stop or a scale-down
		// reaches the sessions through the schedulers (EndSessions), so
		// the cancellation riding a heartbeat response is only the
		// backstop (a scheduler away), and heartbeats can be rare.
		MaxHeartbeatThrottleInterval: HeartbeatThrottle,
		// A graceful stop with no timeout loses the sessions' last report.
		WorkerStopTimeout: 10 * time.Second,
		// A query right after a worker died waited on its sticky queue.
		StickyScheduleToStartTimeout: 3 * time.Second,
	}
	cw := worker.New(c, workflows.TaskQueue, opts)
	cw.RegisterWorkflowWithOptions(workflows.Campaign, workflow.RegisterOptions{Name: workflows.WorkflowName})
	for name, fn := range map[string]any{workflows.SeedActivity: a.Seed, workflows.MonitorActivity: a.Monitor, workflows.CloseActivity: a.Close, workflows.NotifyActivity: a.Notify, workflows.EndSessionsActivity: a.EndSessions, workflows.RulesActivity: a.SetRules, workflows.SeedFileActivity: a.SeedFile} {
		cw.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name})
	}
	fopts := opts
	fopts.MaxConcurrentActivityExecutionSize = cfg.MaxSessions
	fw := worker.New(c, workflows.FetchTaskQueue, fopts)
	fw.RegisterActivityWithOptions(a.FetchSession, activity.RegisterOptions{Name: workflows.FetchSessionActivity})
	if err := cw.Start(); err != nil {
		return nil, fmt.Errorf("start campaign worker: %w", err)
	}
	if err := fw.Start(); err != nil {
		cw.Stop()
		return nil, fmt.Errorf("start fetch worker: %w", err)
	}
	return &Workers{campaign: cw, fetch: fw}, nil
}

// Stop stops both workers, letting sessions report their last outcomes.
func (w *Workers) Stop() {
	w.fetch.Stop()
	w.campaign.Stop()
}

package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// smallOptions are the options of the campaign's short activities: on the
// workflow's task queue, with a heartbeat timeout and a retry policy with
// backoff (1s doubling up to 1m); attempts 0 means no limit (Monitor:
// counts are worth waiting for, never worth failing over).
//
// Every one of them heartbeats while it runs, however long its work takes
// (Monitor in its loop; Seed, Close and Notify through keepAlive), so the
// heartbeat timeout only catches a dead worker; startToClose bounds the
// work itself.
func smallOptions(startToClose time.Duration, attempts int32) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           TaskQueue,
		StartToCloseTimeout: startToClose,
		HeartbeatTimeout:    30 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
			MaximumAttempts:    attempts,
		},
	}
}

// seed runs Seed once per campaign (not again after continue-as-new).
func (r *run) seed() error {
	ctx := workflow.WithActivityOptions(r.ctx, smallOptions(2*time.Minute, 10))
	var res SeedResult
	if err := workflow.ExecuteActivity(ctx, SeedActivity, SeedInput{Config: r.cfg}).Get(r.ctx, &res); err != nil {
		return err
	}
	workflow.GetLogger(r.ctx).Info("seeded", "urls", res.Seeded)
	r.st.Seeded = true
	return nil
}

// startMonitor runs one Monitor; monitored starts the next, so at most one
// is pending and none is left over when the campaign ends.
func (r *run) startMonitor() {
	if r.ending != "" || r.monitoring {
		return
	}
	mctx, cancel := workflow.WithCancel(r.ctx)
	r.monitorCancel = cancel
	r.monitoring = true
	f := workflow.ExecuteActivity(workflow.WithActivityOptions(mctx, smallOptions(10*time.Minute, 0)),
		MonitorActivity, MonitorInput{Config: r.cfg, Report: monitorReport})
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		var res MonitorResult
		err := f.Get(ctx, &res)
		if err != nil && mctx.Err() == nil {
			// Monitor retries on its own; an error here is non-retryable.
			// Counts are only informative: wait and watch again.
			workflow.GetLogger(ctx).Error("monitor failed; retrying in a minute", "err", err)
			_ = workflow.Sleep(mctx, monitorReport)
		}
		r.events.Send(ctx, event{kind: evMonitor, monitor: res, err: err})
	})
}

// monitored applies a Monitor result: new counts, and the end of the
// campaign when the frontier is drained (not while paused: the fleet is
// not fetching then, and a resume is expected) or max-pages is reached.
func (r *run) monitored(e event) {
	r.monitoring = false
	if r.ending != "" {
		return
	}
	if e.err == nil && !e.monitor.Unread {
		s := e.monitor.Stats
		if s.Fetched > r.st.PagesFetched {
			r.fleet().progressed(workflow.Now(r.ctx))
		}
		r.checkErrorRate(s.Fetched-r.st.PagesFetched, s.Failed-r.st.PagesFailed)
		r.setCounts(s.Fetched, s.Failed, s.Queued, s.InFlight)
		r.st.CountsAt = e.monitor.ReadAt
		switch {
		case e.monitor.CapReached || s.CapReached:
			r.beginEnd(campaign.StateCompleted, "max pages reached")
			return
		case e.monitor.Drained && r.st.State != campaign.StatePaused && r.seeding == 0 && !r.cfg.Continuous():
			// A continuous campaign's frontier drains between its
			// revisits: it ends only when stopped (or at a limit).
			r.beginEnd(campaign.StateCompleted, "frontier drained")
			return
		}
	}
	r.startMonitor()
}

// Error-rate spike: more than errorRateAlert of the outcomes between two
// Monitor reports were permanent failures, and at least errorRateMin of
// them (a handful of 404s is no exception).
const (
	errorRateAlert = 0.5
	errorRateMin   = 20
)

// checkErrorRate raises the exception notification for an error-rate
// spike, at most once an hour. Negative deltas (a scheduler restarted and
// its counts began again) are no spike.
func (r *run) checkErrorRate(fetched, failed int64) {
	if failed < errorRateMin || fetched < 0 || float64(failed) <= errorRateAlert*float64(fetched+failed) {
		return
	}
	now := workflow.Now(r.ctx)
	if !r.st.ErrorAlertedAt.IsZero() && now.Sub(r.st.ErrorAlertedAt) < alertWindow {
		return
	}
	r.st.ErrorAlertedAt = now
	r.st.Alert = fmt.Sprintf("error-rate spike: %d of the last %d outcomes failed at %s",
		failed, fetched+failed, now.UTC().Format(time.RFC3339))
	workflow.GetLogger(r.ctx).Error("campaign exception: " + r.st.Alert)
	if r.cfg.NotifyURL != "" {
		in := r.notifyInput("error_rate", r.st.Alert)
		workflow.Go(r.ctx, func(ctx workflow.Context) { r.notify(ctx, in) })
	}
}

func (r *run) setCounts(fetched, failed, queued, inFlight int64) {
	r.st.PagesFetched, r.st.PagesFailed = fetched, failed
	r.st.URLsQueued, r.st.URLsInFlight = queued, inFlight
}

// startDeadline ends the campaign MaxDuration after its first start.
func (r *run) startDeadline() {
	if r.cfg.MaxDuration <= 0 {
		return
	}
	left := r.st.StartedAt.Add(r.cfg.MaxDuration).Sub(workflow.Now(r.ctx))
	if left <= 0 {
		left = time.Millisecond // fire on the next workflow task
	}
	dctx, cancel := workflow.WithCancel(r.ctx)
	r.deadlineCancel = cancel
	t := workflow.NewTimer(dctx, left)
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		err := t.Get(ctx, nil)
		r.events.Send(ctx, event{kind: evDeadline, err: err})
	})
}

func (r *run) notifyInput(ev, text string) NotifyInput {
	return NotifyInput{URL: r.cfg.NotifyURL, Campaign: r.id, Event: ev, Text: text}
}

// notify posts an exception notification; a failure is logged, never
// fatal to the campaign.
func (r *run) notify(ctx workflow.Context, in NotifyInput) {
	actx := workflow.WithActivityOptions(r.ctx, smallOptions(30*time.Second, 3))
	if err := workflow.ExecuteActivity(actx, NotifyActivity, in).Get(ctx, nil); err != nil {
		workflow.GetLogger(ctx).Error("notify failed", "event", in.Event, "err", err)
	}
}

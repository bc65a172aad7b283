package workflows

import (
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// Restart backoff of a failed fetcher: 1s, 2s, 4s ... up to maxBackoff,
// back to the start once a session ran longer than backoffReset.
const (
	firstBackoff = time.Second
	maxBackoff   = time.Minute
	backoffReset = 5 * time.Minute
	alertWindow  = time.Hour
)

// slot is the workflow's view of one fetcher index. Only the main loop
// touches slots; the coroutines it starts report back through run.events.
type slot struct {
	starts   int  // sessions started in this run: the ActivityID's sequence
	token    int  // names the current session or backoff timer; stale events are dropped
	running  bool // a FetchSession is pending
	stopping bool // the workflow asked that session to end
	// restartNow: a restart signal cancelled the session; start it again as
	// soon as it returned, without backoff.
	restartNow  bool
	waiting     bool // a backoff timer is pending
	backoff     time.Duration
	startedAt   time.Time
	key         string // the running session's SessionKey
	cancel      workflow.CancelFunc
	cancelTimer workflow.CancelFunc
}

// fetchActivityID names fetcher index's n-th session of a run.
func fetchActivityID(index, n int) string { return fmt.Sprintf("fetcher-%d-%d", index, n) }

func fetchOptions(index, n int) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           FetchTaskQueue,
		ActivityID:          fetchActivityID(index, n),
		StartToCloseTimeout: 24 * time.Hour,
		HeartbeatTimeout:    20 * time.Second,
		// The session returns its leases before it acknowledges a cancel;
		// waiting for that is what makes stop safe to follow with Close.
		WaitForCancellation: true,
		// One attempt: the workflow restarts a session itself, so that it
		// can count restarts, back off and raise the alert.
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1},
	}
}

// fleet is the campaign's fetchers, as the workflow runs them: their
// slots and sessions, restarts with backoff, rotation, and the detection
// of a fleet that fails (failing.go). It is the run seen from its fleet.
type fleet struct{ *run }

// fleet returns r's fleet.
func (r *run) fleet() fleet { return fleet{r} }

// slotAt returns slot i, growing the fleet's slices as needed.
func (r fleet) slotAt(i int) *slot {
	for len(r.slots) <= i {
		r.slots = append(r.slots, &slot{})
	}
	for len(r.st.Fetchers) <= i {
		r.st.Fetchers = append(r.st.Fetchers, FetcherStatus{Index: len(r.st.Fetchers)})
	}
	return r.slots[i]
}

// desired is how many fetchers should run now.
func (r fleet) desired() int {
	if r.ending != "" || r.st.State != campaign.StateRunning {
		return 0
	}
	return r.st.FetchersDesired
}

// reconcile starts and cancels sessions so that exactly the fetchers below
// desired() run; scaling down cancels the highest indexes.
func (r fleet) reconcile() {
	want := r.desired()
	if want > 0 {
		r.slotAt(want - 1)
	}
	for i, s := range r.slots {
		switch {
		case i < want && !s.running && !s.waiting:
			r.startSession(i)
		case i >= want:
			r.stopSlot(s)
		}
	}
	r.endStopped()
}

// stopSlot cancels slot s's session and backoff timer, if any.
func (r fleet) stopSlot(s *slot) {
	if s.running && !s.stopping {
		s.stopping = true
		s.restartNow = false
		s.cancel()
		r.toEnd = append(r.toEnd, s.key)
	}
	if s.waiting {
		s.waiting = false
		s.token++
		s.cancelTimer()
	}
}

// rotate ends every running session, to be started again at once by
// reconcile with the config as it now stands (a live include): not a
// failure, nor a restart the status counts. Their leases go back.
func (r fleet) rotate() {
	for _, s := range r.slots {
		if s.running && !s.stopping {
			s.stopping = true
			s.cancel()
			r.toEnd = append(r.toEnd, s.key)
		}
	}
	workflow.GetLogger(r.ctx).Info("fetcher sessions restarted for a live include", "sessions", len(r.toEnd))
}

// anyRunning reports whether a session is still pending.
func (r fleet) anyRunning() bool {
	for _, s := range r.slots {
		if s.running {
			return true
		}
	}
	return false
}

func (r fleet) active() int {
	n := 0
	for _, s := range r.slots {
		if s.running && !s.stopping {
			n++
		}
	}
	return n
}

func (r fleet) startSession(i int) {
	s := r.slotAt(i)
	s.starts++
	s.token++
	token := s.token
	actx, cancel := workflow.WithCancel(r.ctx)
	actx = workflow.WithActivityOptions(actx, fetchOptions(i, s.starts))
	s.running, s.stopping, s.restartNow = true, false, false
	s.cancel = cancel
	s.startedAt = workflow.Now(r.ctx)
	s.key = SessionKey(workflow.GetInfo(r.ctx).WorkflowExecution.RunID, fetchActivityID(i, s.starts))
	f := workflow.ExecuteActivity(actx, FetchSessionActivity, FetchSessionInput{Config: r.cfg, Index: i})
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		var c SessionCounters
		err := f.Get(ctx, &c)
		r.events.Send(ctx, event{kind: evSession, index: i, token: token, counters: c, err: err})
	})
}

// sessionEnded handles the end of fetcher i's session.
func (r fleet) sessionEnded(e event) {
	s := r.slotAt(e.index)
	if e.token != s.token || !s.running {
		return
	}
	s.running = false
	fs := &r.st.Fetchers[e.index]
	c := e.counters
	if e.err != nil {
		c = countersFrom(e.err)
	}
	fs.Fetched += c.Fetched
	fs.Failed += c.Failed
	now := workflow.Now(r.ctx)
	if c.Fetched > 0 {
		r.progressed(now)
	}
	if s.stopping {
		s.stopping = false
		return // asked for: pause, stop, scale down or a restart signal
	}

	ran := workflow.Now(r.ctx).Sub(s.startedAt)
	var te *temporal.TimeoutError
	if errors.As(e.err, &te) && te.TimeoutType() == enumspb.TIMEOUT_TYPE_START_TO_CLOSE {
		// The session lived out its 24 hours: a routine rotation, started
		// again at once by reconcile, and not a failure.
		return
	}
	msg := "session ended without an error"
	if e.err != nil {
		msg = errorText(e.err)
	}
	fs.LastError = msg
	r.fetcherFailed(e.index, e.err, msg, now)
	fs.Restarts++
	r.st.Restarts++
	r.st.RecentFailures = append(r.st.RecentFailures, now)
	workflow.GetLogger(r.ctx).Warn("fetcher failed; restarting", "fetcher", e.index, "ran", ran, "err", msg)
	r.checkRestartAlert(now)

	if ran > backoffReset || s.backoff == 0 {
		s.backoff = firstBackoff
	} else {
		s.backoff = min(2*s.backoff, maxBackoff)
	}
	if e.index >= r.desired() {
		return
	}
	s.waiting = true
	s.token++
	token := s.token
	tctx, cancel := workflow.WithCancel(r.ctx)
	s.cancelTimer = cancel
	timer := workflow.NewTimer(tctx, s.backoff)
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		err := timer.Get(ctx, nil)
		r.events.Send(ctx, event{kind: evBackoff, index: e.index, token: token, err: err})
	})
}

// backoffEnded lets fetcher i start again (reconcile starts it).
func (r fleet) backoffEnded(e event) {
	s := r.slotAt(e.index)
	if e.token == s.token && s.waiting && e.err == nil {
		s.waiting = false
	}
}

// restartFetcher applies a restart signal for fetcher i: a session that is
// meant to run is cancelled and started again at once. It counts as a
// restart, but not towards the failure alert.
func (r fleet) restartFetcher(i int) {
	log := workflow.GetLogger(r.ctx)
	if i < 0 || i >= r.desired() {
		log.Warn("restart signal ignored: no such running fetcher", "fetcher", i, "running", r.desired())
		return
	}
	s := r.slotAt(i)
	switch {
	case s.running && !s.stopping:
		s.stopping, s.restartNow = true, true
		s.cancel()
		r.toEnd = append(r.toEnd, s.key)
	case s.waiting:
		s.waiting = false
		s.token++
		s.cancelTimer()
	default:
		return // already on its way back up
	}
	r.st.Restarts++
	r.st.Fetchers[i].Restarts++
	r.freshStart(i)
	log.Info("fetcher restarted by signal", "fetcher", i)
}

// checkRestartAlert raises the exception notification when failure restarts
// within the last hour exceed cfg.RestartAlert, at most once an hour.
func (r fleet) checkRestartAlert(now time.Time) {
	kept := r.st.RecentFailures[:0]
	for _, t := range r.st.RecentFailures {
		if now.Sub(t) < alertWindow {
			kept = append(kept, t)
		}
	}
	r.st.RecentFailures = kept
	if f := r.st.Failure; f != nil && f.Consecutive > 0 && !r.st.FailingAlertedAt.IsZero() && !r.st.FailingAlertedAt.Before(f.Since) {
		return // "every fetcher failing" was raised for this streak and says more
	}
	if len(kept) <= r.cfg.RestartAlert || (!r.st.AlertedAt.IsZero() && now.Sub(r.st.AlertedAt) < alertWindow) {
		return
	}
	r.st.AlertedAt = now
	r.st.Alert = fmt.Sprintf("%d fetcher restarts in the last hour (alert above %d) at %s",
		len(kept), r.cfg.RestartAlert, now.UTC().Format(time.RFC3339))
	if f := r.st.Failure; f != nil {
		r.st.Alert += "; last failure: " + f.Text()
	}
	workflow.GetLogger(r.ctx).Error("campaign exception: " + r.st.Alert)
	if r.cfg.NotifyURL != "" {
		in := r.notifyInput("fetcher_restarts", r.st.Alert)
		workflow.Go(r.ctx, func(ctx workflow.Context) { r.notify(ctx, in) })
	}
}

// countersFrom recovers a session's counters from its error: the details
// of a cancellation (temporal.NewCanceledError(counters)) or of an
// application error, or the last heartbeat of a timed-out session.
func countersFrom(err error) SessionCounters {
	var c SessionCounters
	var ce *temporal.CanceledError
	var ae *temporal.ApplicationError
	var te *temporal.TimeoutError
	switch {
	case errors.As(err, &ce) && ce.HasDetails():
		_ = ce.Details(&c)
	case errors.As(err, &ae) && ae.HasDetails():
		_ = ae.Details(&c)
	case errors.As(err, &te) && te.HasLastHeartbeatDetails():
		_ = te.LastHeartbeatDetails(&c)
	}
	return c
}

// errorText is an activity error's cause, without the activity's envelope
// (type, event IDs), cut short: it is carried across continue-as-new.
func errorText(err error) string {
	var ae *temporal.ActivityError
	if errors.As(err, &ae) {
		if cause := errors.Unwrap(ae); cause != nil {
			err = cause
		}
	}
	msg := err.Error()
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		// Error() adds "(type: T, retryable: B)"; the type is shown as
		// the failure's reason already.
		msg = app.Message()
		if cause := errors.Unwrap(app); cause != nil {
			msg += ": " + cause.Error()
		}
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return msg
}

// versionEndSessions is the workflow.GetVersion change ID of ending the
// cancelled sessions through the schedulers (endStopped).
const versionEndSessions = "end-sessions"

// endStopped ends the sessions cancelled since its last call through the
// schedulers (EndSessions), without waiting for it: a cancellation alone
// reaches a session only on a heartbeat response, up to the worker's
// heartbeat throttle later; the scheduler's FrameEnd reaches it at once.
// Should EndSessions fail (a scheduler away), the cancellation still ends
// them; the failure is in the history and the log.
func (r fleet) endStopped() {
	if len(r.toEnd) == 0 {
		return
	}
	keys := r.toEnd
	r.toEnd = nil
	// Runs from before this change replay without it.
	if workflow.GetVersion(r.ctx, versionEndSessions, workflow.DefaultVersion, 1) < 1 {
		return
	}
	actx := workflow.WithActivityOptions(r.ctx, smallOptions(30*time.Second, 3))
	f := workflow.ExecuteActivity(actx, EndSessionsActivity, EndSessionsInput{Campaign: r.cfg.FrontierKey(), Keys: keys})
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		var res EndSessionsResult
		if err := f.Get(ctx, &res); err != nil {
			workflow.GetLogger(ctx).Warn("ending sessions through the schedulers failed; their cancellation ends them", "sessions", len(keys), "err", err)
		}
	})
}

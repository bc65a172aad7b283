// Package workflows holds the Campaign workflow, the crawl's manager, and the
// names (task queues, signals, update, query, search attributes) that the
// worker, the starter and the `temporal` CLI use to reach it.
//
// Everything here is deterministic workflow code: no clock but
// workflow.Now, no goroutines but workflow.Go, no map iteration.
package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// monitorReport is how often Monitor reports when nothing happens.
const monitorReport = time.Minute

type eventKind int

const (
	evSession   eventKind = iota // a FetchSession returned
	evBackoff                    // a restart backoff timer ended
	evMonitor                    // Monitor returned
	evDeadline                   // MaxDuration passed
	evScaled                     // the scale update changed the fleet size
	evFailAfter                  // the fail-after timer fired (checkFleet decides)
	evRotate                     // a live include: every running session starts again with the new scope
)

// event is what the workflow's own coroutines report to the main loop,
// which alone changes the campaign's state.
type event struct {
	kind     eventKind
	index    int
	token    int
	counters SessionCounters
	monitor  MonitorResult
	err      error
}

// run is one run (continue-as-new generation) of a campaign.
type run struct {
	// root is the workflow's context; its cancellation (Cancel in the Web
	// UI) ends the campaign like stop. ctx is disconnected from it, so that
	// stopping the fleet, Close and Notify still run after a cancel.
	root, ctx workflow.Context
	cfg       campaign.Config
	st        *CampaignState
	limit     int
	id        string
	// closeErr is why the Close failed (Status.CloseError).
	closeErr string

	slots []*slot
	// toEnd are the keys of the sessions cancelled since the last
	// endStopped, which ends them through the schedulers.
	toEnd    []string
	events   workflow.Channel
	controls controls

	monitorCancel  workflow.CancelFunc
	monitoring     bool
	deadlineCancel workflow.CancelFunc
	// failAfterOn: this run may raise "fetchers failing" and fail after
	// FailAfter (versionFailAfter).
	failAfterOn bool
	// failTimer fires at failAt(); checkFleet keeps it in line.
	failTimer struct {
		cancel workflow.CancelFunc
		at     time.Time
	}
	// ending is the final state once the campaign started to end.
	ending string
	// seeding counts the SeedFile activities under way: the campaign does
	// not end as drained meanwhile.
	seeding int

	upserted struct {
		done  bool
		state string
		pages int64
	}
}

// Campaign runs one crawl campaign: it seeds the frontier, keeps a fleet of
// FetchSession activities running (restarting failed ones with backoff and
// raising an exception notification when restarts pile up), watches the
// frontier with Monitor, obeys the control signals, the scale update and
// the status query, and ends when the frontier is drained, max-pages or
// max-duration is reached, or an operator stops or cancels it. It then stops
// the fleet, runs Close (which deletes the queues unless the campaign
// failed) and returns the final Status. A failed campaign returns an error.
//
// It continues as new when the server suggests it or the history reaches
// in.HistoryLimit events, carrying its CampaignState.
func Campaign(ctx workflow.Context, in CampaignInput) (Status, error) {
	cfg := in.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return Status{ID: cfg.ID, State: campaign.StateFailed, Reason: err.Error()},
			temporal.NewNonRetryableApplicationError("invalid campaign config: "+err.Error(), "InvalidConfig", err)
	}
	nameRun(ctx, &cfg, in.State == nil)
	// Never cancelled: the campaign ends through finish, which cancels
	// what it started one by one.
	dctx, _ := workflow.NewDisconnectedContext(ctx)
	r := &run{
		root:     ctx,
		ctx:      dctx,
		cfg:      cfg,
		st:       in.State,
		limit:    in.HistoryLimit,
		id:       cfg.ID,
		controls: newControls(ctx),
		// Runs started before fail-after existed replay without its
		// timer and notification (they would not match their history);
		// they get it at their next continue-as-new.
		failAfterOn: workflow.GetVersion(ctx, versionFailAfter, workflow.DefaultVersion, 1) >= 1,
	}
	if r.limit <= 0 {
		r.limit = DefaultHistoryLimit
	}
	r.events = workflow.NewBufferedChannel(r.ctx, 4096)
	if r.st == nil {
		r.st = &CampaignState{
			State:           campaign.StateStarting,
			FetchersDesired: cfg.Fetchers,
			StartedAt:       workflow.Now(ctx),
		}
	}
	for i := range r.st.Fetchers {
		r.st.Fetchers[i].Running = false
	}
	if err := r.registerHandlers(); err != nil {
		return r.status(), err
	}
	r.publish()

	if !r.st.Seeded {
		if err := r.seed(); err != nil {
			r.beginEnd(campaign.StateFailed, "seeding failed: "+err.Error())
			return r.finish()
		}
	}
	if r.st.State == campaign.StateStarting {
		r.st.State = campaign.StateRunning
	}
	r.startDeadline()
	r.startMonitor()
	return r.loop()
}

func (r *run) registerHandlers() error {
	if err := workflow.SetQueryHandler(r.root, QueryStatus, func() (Status, error) {
		return r.status(), nil
	}); err != nil {
		return err
	}
	if err := r.registerRules(); err != nil {
		return err
	}
	if err := r.registerSeeds(); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(r.root, UpdateScale,
		func(ctx workflow.Context, req ScaleRequest) (ScaleResult, error) {
			prev := r.st.FetchersDesired
			r.st.FetchersDesired = req.Fetchers
			r.events.SendAsync(event{kind: evScaled})
			return ScaleResult{Previous: prev, Fetchers: req.Fetchers}, nil
		},
		workflow.UpdateHandlerOptions{Validator: r.validateScale})
}

func (r *run) validateScale(_ workflow.Context, req ScaleRequest) error {
	if req.Fetchers < 0 || req.Fetchers > campaign.MaxFetchers {
		return fmt.Errorf("fetchers %d: must be between 0 and %d", req.Fetchers, campaign.MaxFetchers)
	}
	if r.ending != "" || r.st.State == campaign.StateStopping || isEnded(r.st.State) {
		return fmt.Errorf("campaign %s is %s: it can no longer be scaled", r.id, r.st.State)
	}
	return nil
}

// loop is the main loop: it waits for a control signal, an event of its own
// coroutines or the workflow's cancellation, applies it, then brings the
// fleet in line and publishes the state.
func (r *run) loop() (Status, error) {
	// Signals that came while seeding (or before this run) apply before the
	// fleet starts, so that a pause sent early starts nothing.
	r.apply(r.controls.drain(r.ctx))
	r.fleet().reconcile()
	r.fleet().checkFleet()
	r.publish()
	for r.ending == "" {
		sel := workflow.NewSelector(r.ctx)
		r.controls.addTo(r.ctx, sel, r.apply)
		sel.AddReceive(r.events, func(c workflow.ReceiveChannel, _ bool) {
			var e event
			c.Receive(r.ctx, &e)
			r.handle(e)
		})
		sel.AddReceive(r.root.Done(), func(c workflow.ReceiveChannel, _ bool) {
			c.Receive(r.ctx, nil)
			r.beginEnd(campaign.StateStopped, "cancelled")
		})
		sel.Select(r.ctx)
		r.fleet().reconcile()
		r.fleet().checkFleet()
		r.publish()
		if r.ending == "" && r.shouldContinueAsNew() {
			return r.continueAsNew()
		}
	}
	return r.finish()
}

// apply applies one batch of control signals; see control.go for the rule.
func (r *run) apply(b controlBatch) {
	if b.empty() || r.ending != "" {
		return
	}
	log := workflow.GetLogger(r.ctx)
	switch {
	case b.stop:
		r.beginEnd(campaign.StateStopped, orDefault(b.reason, "stopped by signal"))
		return
	case b.pause && !b.resumeWins():
		if r.st.State != campaign.StatePaused {
			log.Info("campaign paused", "resume_in_same_batch", b.resume)
			r.st.State = campaign.StatePaused
			r.st.Reason = orDefault(b.reason, "paused by signal")
		}
	case b.resume:
		if r.st.State == campaign.StatePaused {
			log.Info("campaign resumed")
			r.st.State = campaign.StateRunning
			r.st.Reason = ""
			// A resume is the operator's new try (say after creating
			// the missing topic): fail-after counts afresh.
			for i := range r.st.Fetchers {
				r.fleet().freshStart(i)
			}
		}
	}
	for _, k := range b.restarts {
		r.fleet().restartFetcher(k)
	}
}

func (r *run) handle(e event) {
	switch e.kind {
	case evSession:
		r.fleet().sessionEnded(e)
	case evBackoff:
		r.fleet().backoffEnded(e)
	case evMonitor:
		r.monitored(e)
	case evDeadline:
		if e.err == nil && r.ending == "" {
			r.beginEnd(campaign.StateCompleted, fmt.Sprintf("max duration %s reached", r.cfg.MaxDuration))
		}
	case evRotate:
		r.fleet().rotate()
	case evScaled, evFailAfter:
		// reconcile and checkFleet, after every event, do the work.
	}
}

// beginEnd starts the end of the campaign; finish completes it.
func (r *run) beginEnd(final, reason string) {
	if r.ending != "" {
		return
	}
	workflow.GetLogger(r.ctx).Info("campaign ending", "state", final, "reason", reason)
	r.ending = final
	r.st.State = campaign.StateStopping
	r.st.Reason = reason
}

// finish stops the fleet, closes the campaign on the schedulers, notifies
// and returns the final status.
func (r *run) finish() (Status, error) {
	r.stopAll()
	r.publish()
	r.waitFleet()

	var closed CloseResult
	cctx := workflow.WithActivityOptions(r.ctx, smallOptions(5*time.Minute, 5))
	err := workflow.ExecuteActivity(cctx, CloseActivity, CloseInput{
		Config: r.cfg,
		// Nothing of a finished campaign stays in RabbitMQ; a failed one
		// keeps its queues for a look and a retry.
		Delete: r.ending != campaign.StateFailed,
	}).Get(r.ctx, &closed)
	if err != nil {
		workflow.GetLogger(r.ctx).Error("close failed", "err", err)
		r.closeErr = err.Error()
		r.st.Reason += "; close failed: " + err.Error()
	} else {
		r.setCounts(closed.Stats.Fetched, closed.Stats.Failed, closed.Stats.Queued, closed.Stats.InFlight)
		r.st.CountsAt = workflow.Now(r.ctx)
	}
	r.st.State = r.ending
	r.publish()
	if r.cfg.NotifyURL != "" {
		r.notify(r.ctx, r.notifyInput(r.ending, fmt.Sprintf("campaign %s %s: %s; %d pages fetched, %d failed",
			r.id, r.ending, r.st.Reason, r.st.PagesFetched, r.st.PagesFailed)))
	}
	_ = workflow.Await(r.ctx, func() bool { return workflow.AllHandlersFinished(r.ctx) })
	st := r.status()
	if r.ending == campaign.StateFailed {
		// A failed workflow has no result: the final Status travels as the
		// error's details, for `starter status` and `start --wait`.
		return st, temporal.NewApplicationError(fmt.Sprintf("campaign %s failed: %s", r.id, r.st.Reason), "CampaignFailed", st)
	}
	return st, nil
}

// stopAll cancels the monitor, the deadline and every session and timer.
func (r *run) stopAll() {
	if r.monitorCancel != nil {
		r.monitorCancel()
	}
	if r.deadlineCancel != nil {
		r.deadlineCancel()
	}
	r.fleet().cancelFailTimer()
	for _, s := range r.slots {
		r.fleet().stopSlot(s)
	}
	r.fleet().endStopped()
}

// waitFleet waits until every session returned (they record their
// in-flight outcomes and hand their leases back first). A session whose
// worker died ends at its heartbeat timeout, so this wait is bounded.
func (r *run) waitFleet() {
	for r.fleet().anyRunning() {
		var e event
		r.events.Receive(r.ctx, &e)
		if e.kind == evSession {
			r.fleet().sessionEnded(e)
		}
	}
}

func (r *run) shouldContinueAsNew() bool {
	info := workflow.GetInfo(r.ctx)
	return info.GetContinueAsNewSuggested() || info.GetCurrentHistoryLength() >= r.limit
}

// continueAsNew hands the campaign to a new run. Running activities do not
// cross continue-as-new, so the fleet is stopped cleanly first (its leases
// go back; the next run starts it again unless paused). Every signal that
// arrived meanwhile is drained and applied to the state, so none is lost.
func (r *run) continueAsNew() (Status, error) {
	workflow.GetLogger(r.ctx).Info("continuing as new", "run", r.st.Run,
		"history_length", workflow.GetInfo(r.ctx).GetCurrentHistoryLength())
	r.stopAll()
	r.waitFleet()
	_ = workflow.Await(r.ctx, func() bool { return workflow.AllHandlersFinished(r.ctx) })
	b := r.controls.drain(r.ctx)
	if b.restarts != nil {
		// The next run starts every fetcher afresh: a restart asked for
		// now is done by the handover itself.
		r.st.Restarts += len(b.restarts)
		for _, k := range b.restarts {
			if k >= 0 && k < len(r.st.Fetchers) {
				r.st.Fetchers[k].Restarts++
			}
		}
		b.restarts = nil
	}
	r.apply(b)
	if r.root.Err() != nil {
		r.beginEnd(campaign.StateStopped, "cancelled")
	}
	if r.ending != "" {
		return r.finish()
	}
	r.st.Run++
	return r.status(), workflow.NewContinueAsNewError(r.root, WorkflowName, CampaignInput{
		Config:       r.cfg,
		State:        r.st,
		HistoryLimit: r.limit,
	})
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

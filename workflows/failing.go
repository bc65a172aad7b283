package workflows

import (
	"errors"
	"fmt"
	"time"
	"unicode"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// Fetchers that keep failing.
//
// A fetcher is failing from the moment its session fails until a page is
// fetched anywhere in the campaign, or a resume or restart signal gives it
// a fresh start. Every failure is recorded in CampaignState.Failure as soon
// as the session returns, not when it is restarted, so the status query and
// the Web UI name the reason at once however long the restart backoff.
//
// When every desired fetcher is failing, the campaign:
//   - raises the "fetchers_failing" exception (Alert, and a notification)
//     once some fetcher has failed twice in a row, so a worker that died
//     and whose sessions came back elsewhere raises nothing;
//   - ends as failed, with the reason, once it has gone FailAfter with no
//     page fetched and every fetcher failing; a campaign that still
//     fetches pages between failures never does.
//
// Progress is what the workflow can see: Monitor's pages-fetched count
// rising (reported every minute) and a session's own count when it ends.
// Seen late, progress only delays the failure; it never brings it forward.

// versionFailAfter is the workflow.GetVersion change ID of this behaviour.
const versionFailAfter = "fail-after"

// failingAlertGap is the least time between two "fetchers_failing"
// notifications: one per streak, and streaks that come and go do not spam.
const failingAlertGap = 15 * time.Minute

// fetcherFailed records the failure of fetcher i's session at now.
func (r fleet) fetcherFailed(i int, err error, msg string, now time.Time) {
	r.st.Fetchers[i].Failing++
	f := r.st.Failure
	if f == nil {
		f = &FleetFailure{}
		r.st.Failure = f
	}
	f.Reason, f.Message, f.Fetcher, f.At = failureReason(err), msg, i, now
	if f.Consecutive == 0 {
		f.Since = now
	}
	f.Consecutive++
}

// progressed records that a page was fetched (seen at now): the streak of
// failures is over and no fetcher counts as failing any more.
func (r fleet) progressed(now time.Time) {
	r.st.ProgressAt = now
	for i := range r.st.Fetchers {
		r.st.Fetchers[i].Failing = 0
	}
	if f := r.st.Failure; f != nil {
		f.Consecutive, f.Since = 0, time.Time{}
	}
}

// freshStart forgets fetcher i's failures: a resume or restart signal,
// an operator's new try (say after creating the missing Kafka topic).
func (r fleet) freshStart(i int) {
	if i >= 0 && i < len(r.st.Fetchers) {
		r.st.Fetchers[i].Failing = 0
	}
}

// failing returns how many of the desired fetchers are failing, and the
// number desired.
func (r fleet) failing() (n, desired int) {
	desired = r.desired()
	for i := 0; i < desired && i < len(r.st.Fetchers); i++ {
		if r.st.Fetchers[i].Failing > 0 {
			n++
		}
	}
	return n, desired
}

// allFailing reports whether every desired fetcher is failing; never while
// paused or ending (none is desired then).
func (r fleet) allFailing() bool {
	n, desired := r.failing()
	return desired > 0 && n == desired
}

// failAt is when the campaign fails if nothing changes; zero while some
// fetcher is not failing.
func (r fleet) failAt() time.Time {
	if r.st.AllFailingSince.IsZero() || !r.failAfterOn {
		return time.Time{}
	}
	from := r.st.AllFailingSince
	if r.st.ProgressAt.After(from) {
		from = r.st.ProgressAt
	}
	return from.Add(r.cfg.FailAfterDuration())
}

// checkFleet runs after every event: it notes when every fetcher came to be
// failing, raises the exception, ends the campaign once FailAfter passed,
// and otherwise keeps a timer for that moment.
func (r fleet) checkFleet() {
	if r.ending != "" || !r.allFailing() {
		r.st.AllFailingSince = time.Time{}
		r.cancelFailTimer()
		return
	}
	now := workflow.Now(r.ctx)
	if r.st.AllFailingSince.IsZero() {
		r.st.AllFailingSince = now
	}
	if !r.failAfterOn {
		return
	}
	r.checkFailingAlert(now)
	at := r.failAt()
	if !at.After(now) {
		r.cancelFailTimer()
		r.beginEnd(campaign.StateFailed, fmt.Sprintf("every fetcher failing with no page fetched for %s (fail_after): %s",
			r.cfg.FailAfterDuration(), r.st.Failure.Text()))
		return
	}
	if r.failTimer.cancel != nil && r.failTimer.at.Equal(at) {
		return
	}
	r.cancelFailTimer()
	tctx, cancel := workflow.WithCancel(r.ctx)
	r.failTimer.cancel, r.failTimer.at = cancel, at
	t := workflow.NewTimer(tctx, at.Sub(now))
	workflow.Go(r.ctx, func(ctx workflow.Context) {
		err := t.Get(ctx, nil)
		r.events.Send(ctx, event{kind: evFailAfter, err: err})
	})
}

func (r fleet) cancelFailTimer() {
	if r.failTimer.cancel != nil {
		r.failTimer.cancel()
		r.failTimer.cancel = nil
	}
}

// checkFailingAlert raises the "fetchers_failing" exception once per streak
// in which every fetcher is failing and one has failed twice in a row.
func (r fleet) checkFailingAlert(now time.Time) {
	f := r.st.Failure
	if f == nil || f.Since.IsZero() {
		return
	}
	twice := false
	for i := 0; i < r.desired(); i++ {
		twice = twice || r.st.Fetchers[i].Failing >= 2
	}
	alerted := r.st.FailingAlertedAt
	if !twice || !alerted.Before(f.Since) || (!alerted.IsZero() && now.Sub(alerted) < failingAlertGap) {
		return
	}
	r.st.FailingAlertedAt = now
	r.st.Alert = fmt.Sprintf("every fetcher failing since %s (%d failures in a row, no page fetched): %s; the campaign fails at %s unless a page is fetched",
		f.Since.UTC().Format(time.RFC3339), f.Consecutive, f.Text(), r.failAt().UTC().Format(time.RFC3339))
	workflow.GetLogger(r.ctx).Error("campaign exception: " + r.st.Alert)
	if r.cfg.NotifyURL != "" {
		in := r.notifyInput("fetchers_failing", fmt.Sprintf("campaign %s: %s", r.id, r.st.Alert))
		workflow.Go(r.ctx, func(ctx workflow.Context) { r.notify(ctx, in) })
	}
}

// failureStatus is Failure as the status query shows it, with the live
// counts filled in.
func (r fleet) failureStatus() *FleetFailure {
	if r.st.Failure == nil {
		return nil
	}
	f := *r.st.Failure
	f.Failing, f.Desired = r.failing()
	f.FailAt = r.failAt()
	return &f
}

// failureReason names the kind of a session's failure: the type of its
// application error (SinkUnavailable, ...), or the timeout that ended it.
func failureReason(err error) string {
	var ae *temporal.ApplicationError
	var te *temporal.TimeoutError
	var pe *temporal.PanicError
	switch {
	case err == nil:
		return "SessionEnded"
	case errors.As(err, &ae) && ae.Type() != "" && unicode.IsUpper(rune(ae.Type()[0])):
		// A type the activity chose; an unexported Go type
		// (wrapError) says nothing.
		return ae.Type()
	case errors.As(err, &te):
		switch te.TimeoutType() {
		case enumspb.TIMEOUT_TYPE_HEARTBEAT:
			return "HeartbeatTimeout"
		case enumspb.TIMEOUT_TYPE_SCHEDULE_TO_START:
			return "ScheduleToStartTimeout"
		}
		return "Timeout"
	case errors.As(err, &pe):
		return "Panic"
	}
	return "Error"
}

package activities

import (
	"context"
	"errors"
)

// errTODO marks an activity whose body is being written (replaced shortly).
var errTODO = errors.New("not implemented yet")

// Seed declares the campaign's frontier on a scheduler and publishes its
// seeds (confirmed). Idempotent: re-seeding a seen URL is a no-op.
func (a *Activities) Seed(ctx context.Context, in SeedInput) (SeedResult, error) {
	return SeedResult{}, errTODO
}

// FetchSession is one fetcher of the fleet: it holds a session to a
// scheduler, fetches what it is leased, stores pages in the sinks and
// reports outcomes, heartbeating its SessionCounters, until its ctx is
// cancelled (pause, stop, scale down: it then returns ctx.Err() after its
// leases went back) or its session fails beyond reconnecting (an error the
// workflow answers by restarting it).
func (a *Activities) FetchSession(ctx context.Context, in FetchSessionInput) (SessionCounters, error) {
	return SessionCounters{}, errTODO
}

// Monitor watches the campaign's frontier on every scheduler, heartbeating,
// and returns when it is drained, when max-pages is reached, or after
// in.Report with the current stats.
func (a *Activities) Monitor(ctx context.Context, in MonitorInput) (MonitorResult, error) {
	return MonitorResult{}, errTODO
}

// Close releases the campaign on every scheduler and, with in.Delete,
// removes its queues, after the last outcome is recorded.
func (a *Activities) Close(ctx context.Context, in CloseInput) (CloseResult, error) {
	return CloseResult{}, errTODO
}

// Notify posts an exception notification to in.URL as JSON with a
// Slack-compatible "text" field.
func (a *Activities) Notify(ctx context.Context, in NotifyInput) error {
	return errTODO
}

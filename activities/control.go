package activities

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
)

// Seed declares the campaign's frontier on a scheduler and publishes its
// seeds (confirmed). Idempotent: a seed already queued is not published
// again. It heartbeats while it works (see keepAlive).
func (a *Activities) Seed(ctx context.Context, in workflows.SeedInput) (workflows.SeedResult, error) {
	return keepAlive(ctx, func(ctx context.Context) (workflows.SeedResult, error) { return a.seed(ctx, in) })
}

func (a *Activities) seed(ctx context.Context, in workflows.SeedInput) (workflows.SeedResult, error) {
	// A run has its own frontier key (campaign.Config.FrontierKey): the
	// scheduler seeded removes what earlier runs of the ID left there, and
	// every other scheduler does when this run's first fetcher reaches it.
	cfg := in.Config.WithDefaults()
	var errs []error
	for _, addr := range a.Schedulers {
		c, err := a.dialControl(ctx, addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := c.Seed(ctx, cfg, cfg.Seeds)
		c.Close()
		if err != nil {
			return workflows.SeedResult{}, temporal.NewNonRetryableApplicationError(err.Error(), "SeedRefused", err)
		}
		return workflows.SeedResult{Seeded: n}, nil
	}
	return workflows.SeedResult{}, fmt.Errorf("no scheduler reachable: %w", errors.Join(errs...))
}

// pollEvery is how often Monitor asks the schedulers for their stats.
const pollEvery = time.Second

// Monitor watches the campaign's frontier on every scheduler, heartbeating,
// and returns when it is drained, when max-pages is reached, or after
// in.Report with the current stats.
//
// Drained means: on every scheduler nothing queued, held, leased or
// waiting for a confirm, seen twice at least a second apart with no ack and
// no publish in between. A URL is always in exactly one of those places
// until its outcome is recorded (the invariant), so two identical idle
// readings mean nothing is moving and nothing is left.
func (a *Activities) Monitor(ctx context.Context, in workflows.MonitorInput) (workflows.MonitorResult, error) {
	cfg := in.Config.WithDefaults()
	report := in.Report
	if report <= 0 {
		report = time.Minute
	}
	deadline := time.Now().Add(report)
	var prev *session.Stats
	// last is the latest reading; a window with none returns Unread, so
	// that the workflow keeps the counts it had instead of taking zeros.
	last := workflows.MonitorResult{Unread: true}
	var failingSince time.Time
	for {
		st, err := a.sessions().CampaignStats(ctx, a.Schedulers, cfg.FrontierKey())
		switch {
		case err != nil:
			prev = nil
			if failingSince.IsZero() {
				failingSince = time.Now()
			}
			activity.GetLogger(ctx).Warn("stats unavailable", "err", err)
			if time.Since(failingSince) > 5*time.Minute {
				return last, temporal.NewApplicationError(err.Error(), "SchedulerUnreachable")
			}
		default:
			failingSince = time.Time{}
			last = workflows.MonitorResult{Stats: countsOf(st), ReadAt: time.Now()}
			if cfg.MaxPages > 0 && st.Fetched+st.Failed >= cfg.MaxPages {
				last.CapReached = true
				return last, nil
			}
			// A continuous campaign drains between its revisits: that ends
			// nothing, and Monitor reads on to the end of its window.
			if !cfg.Continuous() && st.Idle() && prev != nil && prev.Idle() && prev.Acked == st.Acked && prev.Published == st.Published {
				last.Drained = true
				return last, nil
			}
			if st.Idle() {
				prev = &st
			} else {
				prev = nil
			}
		}
		activity.RecordHeartbeat(ctx, last.Stats)
		if time.Now().After(deadline) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-time.After(pollEvery):
		}
	}
}

// EndSessions ends the named fetcher sessions on every scheduler (OpEnd):
// each stops taking leases, reports what it has in flight, gives the rest
// back and returns, and a reconnect with its key is refused. The workflow
// also cancels them; this makes the end immediate instead of waiting for
// the cancellation to ride a heartbeat response. A scheduler it cannot
// reach is an error (the activity retries, and the cancellation still
// ends the sessions there).
func (a *Activities) EndSessions(ctx context.Context, in workflows.EndSessionsInput) (workflows.EndSessionsResult, error) {
	n, err := a.sessions().EndSessions(ctx, a.Schedulers, in.Campaign, in.Keys)
	return workflows.EndSessionsResult{Ended: n}, err
}

// Close releases the campaign on every scheduler and, with in.Delete,
// removes its queues. The workflow calls it after the fleet has stopped, so
// the last outcomes are recorded before the queues go. A scheduler may take
// longer than the heartbeat timeout to answer (it waits for its pending
// records), so Close heartbeats while it waits (see keepAlive).
func (a *Activities) Close(ctx context.Context, in workflows.CloseInput) (workflows.CloseResult, error) {
	return keepAlive(ctx, func(ctx context.Context) (workflows.CloseResult, error) { return a.close(ctx, in) })
}

func (a *Activities) close(ctx context.Context, in workflows.CloseInput) (workflows.CloseResult, error) {
	st, err := session.CloseVia(ctx, a.Schedulers, func(ctx context.Context, addr string) (session.CampaignCloser, error) {
		return a.dialControl(ctx, addr)
	}, in.Config.FrontierKey(), in.Delete)
	if err != nil {
		return workflows.CloseResult{}, err
	}
	return workflows.CloseResult{Stats: countsOf(st)}, nil
}

// notifyMessage is the webhook payload: Slack-compatible through "text".
type notifyMessage struct {
	Text     string `json:"text"`
	Campaign string `json:"campaign"`
	Event    string `json:"event"`
}

// Notify posts an exception notification to in.URL as JSON with a
// Slack-compatible "text" field, heartbeating while it waits.
func (a *Activities) Notify(ctx context.Context, in workflows.NotifyInput) error {
	_, err := keepAlive(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, a.notify(ctx, in) })
	return err
}

func (a *Activities) notify(ctx context.Context, in workflows.NotifyInput) error {
	body, _ := json.Marshal(notifyMessage{Text: in.Text, Campaign: in.Campaign, Event: in.Event})
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, in.URL, bytes.NewReader(body))
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("notify url %q: %v", in.URL, err), "BadNotifyURL", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("notify %s: %w", in.URL, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("notify %s: HTTP %d", in.URL, resp.StatusCode)
	}
	return nil
}

// keepAlive runs work and heartbeats while it runs, a few times per
// heartbeat timeout. Seed, Close and Notify report no progress of their
// own, yet their work can outlast the heartbeat timeout (Close waits for
// the schedulers' pending records): without this they timed out and were
// retried while the first attempt still ran. With it, a live attempt is
// never timed out, and a dead worker's attempt is still retried at the
// heartbeat timeout rather than at StartToClose. Outside an activity (a
// unit test calling the method), work just runs.
func keepAlive[T any](ctx context.Context, work func(context.Context) (T, error)) (T, error) {
	if !activity.IsActivity(ctx) || activity.GetInfo(ctx).HeartbeatTimeout <= 0 {
		return work(ctx)
	}
	every := keepAliveEvery(activity.GetInfo(ctx).HeartbeatTimeout)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	defer func() {
		close(done)
		<-stopped
	}()
	return work(ctx)
}

// keepAliveEvery is a third of the heartbeat timeout, between 100 ms and
// 5 s; the SDK sends at most one heartbeat per 0.8 timeout anyway.
func keepAliveEvery(timeout time.Duration) time.Duration {
	return min(max(timeout/3, 100*time.Millisecond), 5*time.Second)
}

// SetRules gives every scheduler the campaign's live rules and returns
// once each applies them (session.Client.SetRules), saying whether the
// running fetcher sessions have them; it heartbeats while a scheduler
// waits for the leases of excluded URLs to come back.
func (a *Activities) SetRules(ctx context.Context, in workflows.RulesInput) (workflows.RulesOutput, error) {
	return keepAlive(ctx, func(ctx context.Context) (workflows.RulesOutput, error) {
		t, err := a.sessions().SetRules(ctx, a.Schedulers, in.Campaign, in.Rules)
		return workflows.RulesOutput{Pushed: t.Pushed, Stale: t.Stale}, err
	})
}

// countsOf is what the workflow keeps of a scheduler reading.
func countsOf(s session.Stats) workflows.Counts {
	return workflows.Counts{Fetched: s.Fetched, Failed: s.Failed, Queued: s.Queued, InFlight: s.InFlight, CapReached: s.CapReached}
}

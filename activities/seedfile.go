package activities

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/drover-crawl/drover/workflows"
)

// SeedFile streams a seed list (an http(s) URL, or a path this worker can
// read) to a scheduler in batches (package seedfile), for the workflow's
// "seed" Update. It heartbeats its counts after every batch; an attempt
// retried (its worker died, a scheduler went away) resumes after the last
// batch reported, and a batch sent again is queued once by the scheduler.
// Seeds the campaign's scope refuses are counted and listed, never queued.
func (a *Activities) SeedFile(ctx context.Context, in workflows.SeedFileInput) (seedfile.Counts, error) {
	var from seedfile.Counts
	if activity.HasHeartbeatDetails(ctx) {
		if err := activity.GetHeartbeatDetails(ctx, &from); err != nil {
			from = seedfile.Counts{}
		}
	}
	cfg := in.Config.WithDefaults()
	scope, err := urlrule.NewScope(cfg)
	if err != nil {
		return from, temporal.NewNonRetryableApplicationError(err.Error(), "SeedRefused", err)
	}
	rc, err := seedfile.Open(ctx, in.Source, os.Stdin)
	if err != nil {
		return from, temporal.NewNonRetryableApplicationError(err.Error(), "SeedListUnreadable", err)
	}
	defer rc.Close()
	s := &seedfile.Seeder{Config: cfg, Addrs: a.Schedulers, Dial: func(ctx context.Context, addr string) (seedfile.Control, error) {
		return a.dialControl(ctx, addr)
	}}
	defer s.Close()
	hb := &progress{ctx: ctx, last: from}
	stop := hb.beat()
	defer stop()
	c, err := seedfile.Stream(ctx, rc, seedfile.Options{
		DropParams: cfg.DropParams,
		Scope:      scope,
		From:       from,
		Progress:   hb.set,
	}, s.Send)
	if err != nil && !errors.Is(err, context.Canceled) {
		// Retried from the last progress, with its counts.
		return c, temporal.NewApplicationError(err.Error(), "SeedStreamFailed", c)
	}
	return c, err
}

// progress heartbeats a stream's last counts, after each batch and every
// few seconds between (a slow source), so that the heartbeat details are
// always the counts to resume from. Outside an activity (a unit test) it
// records nothing.
type progress struct {
	ctx  context.Context
	mu   sync.Mutex
	last seedfile.Counts
}

func (p *progress) set(c seedfile.Counts) {
	p.mu.Lock()
	p.last = c
	p.mu.Unlock()
	p.record()
}

func (p *progress) record() {
	if !activity.IsActivity(p.ctx) {
		return
	}
	p.mu.Lock()
	c := p.last
	p.mu.Unlock()
	activity.RecordHeartbeat(p.ctx, c)
}

// beat heartbeats every few seconds until the returned func is called.
func (p *progress) beat() func() {
	if !activity.IsActivity(p.ctx) || activity.GetInfo(p.ctx).HeartbeatTimeout <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(keepAliveEvery(activity.GetInfo(p.ctx).HeartbeatTimeout))
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-p.ctx.Done():
				return
			case <-t.C:
				p.record()
			}
		}
	}()
	return func() {
		close(done)
		<-stopped
	}
}

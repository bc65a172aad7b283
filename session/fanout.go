package session

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/tlsconf"
)

// ParseAddrs splits a DROVER_SCHEDULER value ("host:port,host:port").
func ParseAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// CampaignStats asks every scheduler for its stats of a campaign and adds
// them up. A scheduler that cannot be reached is named in Missing, and the
// sum still counts as idle only when RabbitMQ shows no consumer of the
// campaign beyond the schedulers that answered (Stats.Idle): a scheduler
// gone for good does not hold a campaign open, and one cut off but alive
// does not let it end early. It fails when no scheduler answers, or when
// one answers with an error.
func (cl Client) CampaignStats(ctx context.Context, addrs []string, id string) (Stats, error) {
	total := Stats{Campaign: id}
	var unreachable []error
	for _, addr := range addrs {
		c, err := cl.DialControl(ctx, addr)
		if err != nil {
			if errors.Is(err, ErrRefused) || errors.Is(err, ErrTLS) || errors.Is(err, tlsconf.ErrPlaintext) || ctx.Err() != nil {
				return total, err
			}
			total.Missing = append(total.Missing, addr)
			unreachable = append(unreachable, err)
			continue
		}
		st, err := c.Stats(ctx, id)
		c.Close()
		var rerr *replyError
		switch {
		case errors.As(err, &rerr), err != nil && ctx.Err() != nil:
			return total, err
		case err != nil:
			total.Missing = append(total.Missing, addr)
			unreachable = append(unreachable, err)
			continue
		}
		total.Add(st)
	}
	if len(total.Missing) == len(addrs) {
		return total, fmt.Errorf("no scheduler reachable: %w", errors.Join(unreachable...))
	}
	return total, nil
}

// Failures gathers a campaign's failure records from every scheduler, by
// URL (a URL recorded by two schedulers, after a failover, is merged), and
// the total count, which may exceed the list (MaxFailuresReply per
// scheduler).
func (cl Client) Failures(ctx context.Context, addrs []string, id, reason string) ([]failure.Record, int, error) {
	byURL := map[string]failure.Record{}
	total := 0
	for _, addr := range addrs {
		c, err := cl.DialControl(ctx, addr)
		if err != nil {
			return nil, 0, err
		}
		fs, n, err := c.Failures(ctx, id, reason)
		c.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("scheduler %s: %w", addr, err)
		}
		total += n - len(fs)
		for _, f := range fs {
			byURL[f.URL] = byURL[f.URL].Merge(f)
		}
	}
	out := make([]failure.Record, 0, len(byURL))
	for _, f := range byURL {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, total + len(out), nil
}

// DropFailures forgets a campaign's failure records on every scheduler: a
// new run of the campaign starts with none.
func (cl Client) DropFailures(ctx context.Context, addrs []string, id string) error {
	for _, addr := range addrs {
		c, err := cl.DialControl(ctx, addr)
		if err != nil {
			return err
		}
		_, err = c.do(ctx, Request{Op: OpForget, Campaign: &campaign.Config{ID: id}})
		c.Close()
		if err != nil {
			return fmt.Errorf("scheduler %s: %w", addr, err)
		}
	}
	return nil
}

// ForgetHistory drops a lineage's fetch history on every scheduler, in
// two rounds: each is asked first whether it could (no campaign of the
// lineage open or closing there), and only when every one said yes is
// the history dropped, so that a refusal leaves every history whole. It
// returns the error of each scheduler that refused or could not be
// reached; one that fails in the second round leaves the others' dropped,
// and the call may be made again.
func (cl Client) ForgetHistory(ctx context.Context, addrs []string, lineage string) error {
	for _, probe := range []bool{true, false} {
		var errs []error
		for _, addr := range addrs {
			c, err := cl.DialControl(ctx, addr)
			if err == nil {
				_, err = c.do(ctx, Request{Op: OpForgetHistory, Campaign: &campaign.Config{ID: lineage}, Probe: probe})
				c.Close()
			}
			if err != nil {
				errs = append(errs, err) // it names the scheduler
			}
		}
		if len(errs) > 0 {
			return errors.Join(errs...)
		}
	}
	return nil
}

// endSessionsWithin bounds EndSessions' call to one scheduler, so that a
// scheduler that hangs does not hold back the others' ends.
const endSessionsWithin = 5 * time.Second

// EndSessions ends the campaign's fetcher sessions named by keys on every
// scheduler at once, so that one reconnecting elsewhere is refused too.
// Each scheduler gets endSessionsWithin, whatever the others answer; it
// returns how many sessions were open and every error: a scheduler it
// cannot reach keeps its sessions until their cancellation arrives on a
// heartbeat response.
func (cl Client) EndSessions(ctx context.Context, addrs []string, id string, keys []string) (int, error) {
	ns := make([]int, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, endSessionsWithin)
			defer cancel()
			c, err := cl.DialControl(ctx, addr)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			ns[i], errs[i] = c.EndSessions(ctx, id, keys)
		})
	}
	wg.Wait()
	n := 0
	for _, k := range ns {
		n += k
	}
	return n, errors.Join(errs...)
}

// CloseEverywhere closes a campaign (a frontier key,
// campaign.Config.FrontierKey) on every scheduler, in two rounds.
// First each one stops consuming it, finishes recording its outcomes and
// refuses its fetchers from then on; the stats returned add up what each
// knew then. Then, with del, each removes the campaign's queues (the first
// one does; deleting is idempotent) and its own seen marks, so that a new
// run of the same ID starts with a fresh seen-set on every scheduler.
// Deleting only after every scheduler let go means none is still parking
// or publishing into queues that vanish under it; when one could not be
// reached, nothing is deleted, and the campaign's next run removes what
// this one left (each run has its own frontier key, so nothing of it is
// ever taken for the next run's).
func (cl Client) CloseEverywhere(ctx context.Context, addrs []string, id string, del bool) (Stats, error) {
	return CloseVia(ctx, addrs, func(ctx context.Context, addr string) (CampaignCloser, error) {
		return cl.DialControl(ctx, addr)
	}, id, del)
}

// CampaignCloser closes campaigns on one scheduler (a *Control).
type CampaignCloser interface {
	CloseCampaign(ctx context.Context, id string, del bool) (Stats, error)
	Close() error
}

// CloseVia is CloseEverywhere over the given dial.
func CloseVia(ctx context.Context, addrs []string, dial func(ctx context.Context, addr string) (CampaignCloser, error), id string, del bool) (Stats, error) {
	total := Stats{Campaign: id}
	// Every scheduler is asked, whatever the others answer: one that
	// cannot be reached does not keep the rest from letting go.
	each := func(f func(c CampaignCloser) error) error {
		var errs []error
		for _, addr := range addrs {
			c, err := dial(ctx, addr)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			err = f(c)
			c.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("scheduler %s: %w", addr, err))
			}
		}
		return errors.Join(errs...)
	}
	err := each(func(c CampaignCloser) error {
		st, err := c.CloseCampaign(ctx, id, false)
		total.Add(st)
		return err
	})
	if err != nil || !del {
		return total, err
	}
	return total, each(func(c CampaignCloser) error {
		_, err := c.CloseCampaign(ctx, id, true)
		return err
	})
}

// ReleaseCampaign closes a campaign on every scheduler and deletes its
// queues and seen marks: what the workflow's Close does, for a campaign
// that ended without running it (terminated).
func (cl Client) ReleaseCampaign(ctx context.Context, addrs []string, id string) error {
	_, err := cl.CloseEverywhere(ctx, addrs, id, true)
	return err
}

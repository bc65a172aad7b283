package session

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/drover-crawl/drover/campaign"
)

// RulesTaken says what became of live rules given to the schedulers.
type RulesTaken struct {
	// Pushed: every scheduler sent them to the campaign's fetcher sessions
	// that asked (FrameRules); false when one cannot (it is older).
	Pushed bool
	// Stale counts the campaign's fetcher sessions, over the schedulers,
	// that did not ask: their scope changes only with a new session.
	Stale int
}

// SetRules gives this scheduler the live rules of the campaign whose
// frontier key is key (OpRules); it returns once they apply and no lease
// of a URL they exclude is out, and says whether its fetcher sessions
// have them.
func (c *Control) SetRules(ctx context.Context, key string, rules campaign.Rules) (RulesTaken, error) {
	rep, err := c.do(ctx, Request{Op: OpRules, Campaign: &campaign.Config{ID: key, Live: rules}})
	return RulesTaken{Pushed: rep.Pushed, Stale: rep.Stale}, err
}

// SetRules gives every scheduler the campaign's live rules, at once, and
// returns every error: a rule holds once each scheduler has it (each
// stores it, so a scheduler that restarts later keeps it).
func (cl Client) SetRules(ctx context.Context, addrs []string, key string, rules campaign.Rules) (RulesTaken, error) {
	taken := make([]RulesTaken, len(addrs))
	errs := cl.eachScheduler(ctx, addrs, func(i int, c *Control) error {
		var err error
		taken[i], err = c.SetRules(ctx, key, rules)
		return err
	})
	all := RulesTaken{Pushed: true}
	for _, t := range taken {
		all.Pushed = all.Pushed && t.Pushed
		all.Stale += t.Stale
	}
	return all, errors.Join(errs...)
}

// eachScheduler runs f on a control session to each of addrs at once and
// returns one error per address, nil where f succeeded, each naming its
// scheduler.
func (cl Client) eachScheduler(ctx context.Context, addrs []string, f func(i int, c *Control) error) []error {
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			c, err := cl.DialControl(ctx, addr)
			if err == nil {
				err = f(i, c)
				c.Close()
			}
			if err != nil {
				errs[i] = fmt.Errorf("scheduler %s: %w", addr, err)
			}
		})
	}
	wg.Wait()
	return errs
}

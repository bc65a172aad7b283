package session

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/drover-crawl/drover/campaign"
)

// SetRules gives this scheduler the live rules of the campaign whose
// frontier key is key (OpRules); it returns once they apply and no lease
// of a URL they exclude is out.
func (c *Control) SetRules(ctx context.Context, key string, rules campaign.Rules) error {
	_, err := c.do(ctx, Request{Op: OpRules, Campaign: &campaign.Config{ID: key, Live: rules}})
	return err
}

// SetRules gives every scheduler the campaign's live rules, at once, and
// returns every error: a rule holds once each scheduler has it (each
// stores it, so a scheduler that restarts later keeps it).
func (cl Client) SetRules(ctx context.Context, addrs []string, key string, rules campaign.Rules) error {
	return errors.Join(cl.eachScheduler(ctx, addrs, func(_ int, c *Control) error {
		return c.SetRules(ctx, key, rules)
	})...)
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

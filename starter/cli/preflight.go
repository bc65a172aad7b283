package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/sink"
)

// PreflightFunc checks, before a campaign starts, that what it needs
// answers; nil skips the check.
type PreflightFunc func(ctx context.Context, env Env, cfg campaign.Config) error

// Preflight checks that a scheduler answers (the schedulers need RabbitMQ,
// so this is also the starter's view of the frontier) and that the
// campaign's Kafka and PostgreSQL sinks are reachable from here. Each
// failure is one line naming the address and how to start the service.
func Preflight(ctx context.Context, env Env, cfg campaign.Config) error {
	var errs []string
	for _, addr := range env.Schedulers {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := frontier.DialControl(cctx, addr, env.Token)
		cancel()
		if err == nil {
			c.Close()
			errs = nil
			break
		}
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	for _, uri := range cfg.Sinks {
		if err := sink.Check(ctx, uri, ""); err != nil {
			return fmt.Errorf("campaign %s not started: %w", cfg.ID, err)
		}
	}
	return nil
}

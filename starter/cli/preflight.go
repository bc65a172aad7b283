package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
)

// PreflightFunc checks, before a campaign starts, that what it needs
// answers; nil skips the check.
type PreflightFunc func(ctx context.Context, env Env, cfg campaign.Config) error

// preflightTimeout bounds the whole preflight: a start must not hang on a
// service that does not answer.
const preflightTimeout = 20 * time.Second

// Preflight checks, from where the starter runs, what can be checked before
// a campaign starts: that a scheduler answers (the schedulers need
// RabbitMQ, so this is also the starter's view of the frontier) and can run
// the campaign (it has the priority policy the campaign names), and that
// every sink will take pages (sink.Check: the Kafka topic exists or the URI
// asks to create it, the WARC directory is writable, the PostgreSQL table
// can be created). The default sink kafka:///TOPIC is checked on
// env.KafkaBrokers, the workers' default. It returns every problem found,
// one per line, each naming what to fix.
func Preflight(ctx context.Context, env Env, cfg campaign.Config) error {
	ctx, cancel := context.WithTimeout(ctx, preflightTimeout)
	defer cancel()
	var errs []error
	var dial []string
	for _, addr := range env.Schedulers {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := env.Sessions().DialControl(cctx, addr)
		cancel()
		if err == nil {
			dial = nil
			if err := checkCampaign(ctx, c, cfg); err != nil {
				errs = append(errs, err)
			}
			c.Close()
			break
		}
		dial = append(dial, err.Error())
	}
	if len(dial) > 0 {
		errs = append(errs, errors.New(strings.Join(dial, "; ")))
	}
	opts := sink.Options{Campaign: cfg.ID, BodyCap: cfg.BodyCap, KafkaBrokers: env.KafkaBrokers, Secrets: env.SinkSecrets}
	for _, uri := range cfg.Sinks {
		if err := sink.Check(ctx, uri, opts); err != nil {
			errs = append(errs, err)
		}
	}
	if ctx.Err() != nil {
		errs = append(errs, fmt.Errorf("preflight gave up after %s", preflightTimeout))
	}
	return errors.Join(errs...)
}

// checkCampaign asks a scheduler whether it can run cfg (frontier's
// OpCheck). A scheduler older than the check cannot say; its refusal, if
// any, comes when the campaign is seeded, and fails the campaign.
func checkCampaign(ctx context.Context, c *session.Control, cfg campaign.Config) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := c.Check(cctx, cfg)
	if err != nil && strings.Contains(err.Error(), fmt.Sprintf("unknown op %q", session.OpCheck)) {
		return nil
	}
	return err
}

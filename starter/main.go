// Command starter is the operator's CLI for drover campaigns: start, watch,
// control and list crawl campaigns (DESIGN.md, "The operator's commands").
// The commands live in package cli; this main only reads the environment.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/starter/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	e := node.LoadEnv(os.Getenv)
	env := cli.Env{
		TemporalAddress:   e.TemporalAddress,
		TemporalNamespace: e.TemporalNamespace,
		TemporalUIURL:     e.TemporalUIURL,
		TemporalUI:        e.TemporalUI, // deprecated: TEMPORAL_UI_URL's old name
		Schedulers:        e.Schedulers,
		Token:             e.Token,
		KafkaBrokers:      e.KafkaBrokers,
	}
	app := &cli.App{
		Env:   env,
		Out:   os.Stdout,
		Err:   os.Stderr,
		Dial:  cli.DialTemporal,
		Stats: frontier.CampaignStats,
		// Checked before a start: a scheduler answers, the sinks take pages.
		Preflight: cli.Preflight,
		Release:   frontier.ReleaseCampaign,
		// `failures` and an ended campaign's counts by reason.
		Failures:     frontier.Failures,
		DropFailures: frontier.DropFailures,
	}
	code := app.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

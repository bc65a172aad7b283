// Command starter is the operator's CLI for drover campaigns: start, watch,
// control and list crawl campaigns (docs/operating.md lists the commands).
// The commands live in package cli; this main only reads the environment.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/starter/cli"
	"github.com/drover-crawl/drover/tlsconf"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	env := cli.Env{Env: envconf.Load(os.Getenv), Temporal: tlsconf.TemporalFromEnv(nil)}
	sec := tlsconf.FromEnv(nil)
	var err error
	if env.SessionTLS, err = sec.Client(); err == nil {
		env.SinkSecrets, err = sink.SecretsFrom(sec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "starter:", err)
		os.Exit(cli.ExitUsage)
	}
	env.InsecurePlaintext = sec.InsecurePlaintext
	// The scheduler calls take the token App passes, over env's TLS.
	sessions := func(token string) session.Client {
		c := env.Sessions()
		c.Token = token
		return c
	}
	app := &cli.App{
		Env:  env,
		Out:  os.Stdout,
		Err:  os.Stderr,
		Dial: cli.DialTemporal,
		Stats: func(ctx context.Context, addrs []string, token, id string) (session.Stats, error) {
			return sessions(token).CampaignStats(ctx, addrs, id)
		},
		// Checked before a start: a scheduler answers, the sinks take pages.
		Preflight: cli.Preflight,
		Release: func(ctx context.Context, addrs []string, token, id string) error {
			return sessions(token).ReleaseCampaign(ctx, addrs, id)
		},
		// `failures` and an ended campaign's counts by reason.
		Failures: func(ctx context.Context, addrs []string, token, id, reason string) ([]failure.Record, int, error) {
			return sessions(token).Failures(ctx, addrs, id, reason)
		},
		DropFailures: func(ctx context.Context, addrs []string, token, id string) error {
			return sessions(token).DropFailures(ctx, addrs, id)
		},
		ForgetHistory: func(ctx context.Context, addrs []string, token, lineage string) error {
			return sessions(token).ForgetHistory(ctx, addrs, lineage)
		},
		URLState: func(ctx context.Context, addrs []string, token, key, url string) (session.URLState, error) {
			return sessions(token).URLState(ctx, addrs, key, url)
		},
		URLs: func(ctx context.Context, addrs []string, token, key string, q session.URLQuery) (session.URLPage, error) {
			return sessions(token).URLs(ctx, addrs, key, q)
		},
		SeedControl: func(ctx context.Context, addr, token string) (seedfile.Control, error) {
			return sessions(token).DialControl(ctx, addr)
		},
	}
	code := app.Run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}

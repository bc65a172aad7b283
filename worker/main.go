// Command worker runs a drover Temporal worker: the Campaign workflow, its
// activities and the FetchSession fetchers. With -scheduler it also runs a
// scheduler in-process (single-machine mode).
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/tlsconf"
)

func main() {
	withScheduler := flag.Bool("scheduler", false, "also run a scheduler in this process")
	identity := flag.String("identity", "", "worker identity (default: worker@HOSTNAME:PID)")
	maxSessions := flag.Int("max-sessions", 256, "FetchSession activities this worker runs at most")
	metricsAddr := flag.String("metrics-addr", metrics.DefaultWorkerAddr, "serve Prometheus metrics on `ADDR`/metrics (\"off\": none)")
	sec := tlsconf.FromEnv(nil) // --tls-cert/--tls-key: the client certificate, and with -scheduler its server's
	sec.Flags(flag.CommandLine, true)
	flag.Parse()
	sessTLS, err := sec.Client()
	var sinkSecrets sink.Secrets
	if err == nil {
		sinkSecrets, err = sink.SecretsFrom(sec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	env := node.LoadEnv(os.Getenv)
	if *identity == "" {
		h, _ := os.Hostname()
		*identity = fmt.Sprintf("worker@%s:%d", h, os.Getpid())
	}
	token, schedulers := env.Token, env.Schedulers
	if env.DevToken {
		log.Warn("DROVER_TOKEN unset: using the documented dev token")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg := metrics.NewRegistry()
	wm, err := activities.NewWorkerMetrics(reg, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	defer wm.Close()
	ms, err := metrics.Serve(*metricsAddr, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err, "(set --metrics-addr)")
		os.Exit(1)
	}
	defer ms.Close()

	var schedErr <-chan error
	if *withScheduler {
		cfg := frontier.DefaultServerConfig()
		cfg.Token = token
		amqpURL := env.AMQPURL
		serverTLS, err := sec.Server()
		var amqpTLS *tls.Config
		if err == nil {
			amqpTLS, err = sec.AMQPTLS(amqpURL)
		}
		if err == nil {
			var s *node.Scheduler
			s, err = node.StartScheduler(ctx, node.SchedulerConfig{Server: cfg, Listen: schedulers[0], AMQPURL: amqpURL, AMQPTLS: amqpTLS, SeenPath: filepath.Join("data", "seen", "scheduler-0"), Log: log,
				TLS: serverTLS, InsecurePlaintext: sec.InsecurePlaintext, Metrics: reg})
			if err == nil {
				defer s.Close()
				schedErr = s.Done()
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
	}

	addr := env.TemporalAddress
	// Waits while Temporal does not answer; returns at once on a
	// configuration error (address, namespace, credentials).
	topts := client.Options{HostPort: addr, Namespace: env.TemporalNamespace, MetricsHandler: wm.Temporal, Logger: tlog.NewStructuredLogger(slog.New(node.QuietCancels(log.Handler())))}
	if err := tlsconf.TemporalFromEnv(nil).Apply(&topts); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(2)
	}
	c, err := node.DialTemporal(ctx, topts, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v (start the dev stack with `make dev`, or set TEMPORAL_ADDRESS)\n", err)
		os.Exit(1)
	}
	defer c.Close()
	acts := &activities.Activities{
		Schedulers: schedulers, Token: token, KafkaBrokers: env.KafkaBrokers, Identity: *identity,
		SessionTLS: sessTLS, InsecurePlaintext: sec.InsecurePlaintext, SinkSecrets: sinkSecrets,
	}
	wm.Instrument(acts)
	w, err := node.StartWorkers(c, node.WorkerConfig{MaxSessions: *maxSessions, Identity: *identity, Activities: acts})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		os.Exit(1)
	}
	log.Info("worker running", "temporal", addr, "schedulers", schedulers, "identity", *identity, "metrics", metricsURL(ms))
	select {
	case <-ctx.Done():
	case err := <-schedErr:
		fmt.Fprintln(os.Stderr, "worker: scheduler:", err)
	}
	w.Stop()
}

func metricsURL(s *metrics.Server) string {
	if s == nil {
		return "off"
	}
	return s.URL()
}

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
	"runtime/debug"
	"syscall"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/tlsconf"
	"github.com/prometheus/client_golang/prometheus"

	// A scheduler run in-process (-scheduler) keeps Pebble's C allocations
	// in two malloc arenas.
	_ "github.com/drover-crawl/drover/internal/cmalloc"
)

func main() { os.Exit(run()) }

// run is the command; it returns the exit status, so that its defers
// (closing the metrics server, the in-process scheduler, the Temporal
// client) run on every path.
func run() int {
	withScheduler := flag.Bool("scheduler", false, "also run a scheduler in this process")
	identity := flag.String("identity", "", "worker identity (default: worker@HOSTNAME:PID)")
	maxSessions := flag.Int("max-sessions", 256, "FetchSession activities this worker runs at most")
	metricsAddr := flag.String("metrics-addr", metrics.DefaultWorkerAddr, "serve Prometheus metrics on `ADDR`/metrics (\"off\": none)")
	pprofAddr := flag.String("pprof-addr", "", "serve Go's profiles (net/http/pprof) on `ADDR`/debug/pprof/ (empty: off; bind loopback)")
	sec := tlsconf.FromEnv(nil) // --tls-cert/--tls-key: the client certificate, and with -scheduler its server's
	sec.Flags(flag.CommandLine, true)
	flag.Parse()
	sessTLS, sinkSecrets, err := clientSecurity(sec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	env := envconf.Load(os.Getenv)
	envconf.DefaultGC(os.Getenv, envconf.WorkerGCPercent)
	sessionsRunning := limitMemory(*withScheduler, len(env.Schedulers))
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
	reg, wm, ms, err := serveMetrics(*metricsAddr, log)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	defer ms.Close()
	defer wm.Close()
	ps, err := metrics.ServeProfiles(*pprofAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err, "(set --pprof-addr)")
		return 1
	}
	defer ps.Close()

	var schedErr <-chan error
	if *withScheduler {
		s, err := startScheduler(ctx, env, sec, log, reg)
		if err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 1
		}
		defer s.Close()
		schedErr = s.Done()
	}

	addr := env.TemporalAddress
	c, code := dialTemporal(ctx, env, wm, log)
	if c == nil {
		return code
	}
	defer c.Close()
	acts := &activities.Activities{
		Schedulers: schedulers, Token: token, KafkaBrokers: env.KafkaBrokers, Identity: *identity,
		SessionTLS: sessTLS, InsecurePlaintext: sec.InsecurePlaintext, SinkSecrets: sinkSecrets,
	}
	acts.SessionsRunning = sessionsRunning
	wm.Instrument(acts)
	w, err := temporalnode.StartWorkers(c, temporalnode.WorkerConfig{MaxSessions: *maxSessions, Identity: *identity, Activities: acts})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	log.Info("worker running", "temporal", addr, "schedulers", schedulers, "identity", *identity, "metrics", metricsURL(ms))
	select {
	case <-ctx.Done():
	case err := <-schedErr:
		fmt.Fprintln(os.Stderr, "worker: scheduler:", err)
		code = 1
	}
	w.Stop()
	return code
}

// limitMemory sets the worker's soft memory limit for no session, and
// returns what keeps it to the sessions and campaigns running
// (envconf.WorkerMemoryLimit); nil, and no limit, when the environment
// sets GOMEMLIMIT or the worker also runs a scheduler, whose hosts and
// URLs the limit does not count.
func limitMemory(withScheduler bool, schedulers int) func(sessions, campaigns int) {
	if withScheduler || envconf.MemoryLimitSet(os.Getenv) {
		return nil
	}
	debug.SetMemoryLimit(envconf.WorkerMemoryLimit(0, 0, schedulers))
	return func(sessions, campaigns int) {
		debug.SetMemoryLimit(envconf.WorkerMemoryLimit(sessions, campaigns, schedulers))
	}
}

// dialTemporal dials the Temporal of env; it waits while Temporal does not
// answer and returns at once on a configuration error (address,
// namespace, credentials), with nil and the exit status.
func dialTemporal(ctx context.Context, env envconf.Env, wm *activities.WorkerMetrics, log *slog.Logger) (client.Client, int) {
	topts := client.Options{HostPort: env.TemporalAddress, Namespace: env.TemporalNamespace, MetricsHandler: wm.Temporal, Logger: tlog.NewStructuredLogger(slog.New(node.QuietCancels(log.Handler())))}
	if err := temporalnode.Secure(&topts, tlsconf.TemporalFromEnv(nil)); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return nil, 2
	}
	c, err := temporalnode.DialTemporal(ctx, topts, log)
	if err != nil {
		fmt.Fprintf(os.Stderr, "worker: %v (start the dev stack with `make dev`, or set TEMPORAL_ADDRESS)\n", err)
		return nil, 1
	}
	return c, 0
}

// serveMetrics registers the worker's metrics and serves them on addr.
func serveMetrics(addr string, log *slog.Logger) (*prometheus.Registry, *activities.WorkerMetrics, *metrics.Server, error) {
	reg := metrics.NewRegistry()
	wm, err := activities.NewWorkerMetrics(reg, log)
	if err != nil {
		return nil, nil, nil, err
	}
	ms, err := metrics.Serve(addr, reg)
	if err != nil {
		wm.Close()
		return nil, nil, nil, fmt.Errorf("%w (set --metrics-addr)", err)
	}
	return reg, wm, ms, nil
}

// clientSecurity is the TLS of the worker's scheduler sessions and its
// sinks' credentials, from the flags and the environment.
func clientSecurity(sec tlsconf.Options) (*tls.Config, sink.Secrets, error) {
	sessTLS, err := sec.Client()
	if err != nil {
		return nil, sink.Secrets{}, err
	}
	sinkSecrets, err := sink.SecretsFrom(sec)
	return sessTLS, sinkSecrets, err
}

// startScheduler runs a scheduler in this process (-scheduler), on the
// first scheduler address, with the session TLS of --tls-cert/--tls-key.
func startScheduler(ctx context.Context, env envconf.Env, sec tlsconf.Options, log *slog.Logger, reg *prometheus.Registry) (*node.Scheduler, error) {
	cfg := frontier.DefaultServerConfig()
	cfg.Token, cfg.QueueType = env.Token, env.QueueType
	serverTLS, err := sec.Server()
	if err != nil {
		return nil, err
	}
	amqpTLS, err := sec.AMQPTLS(env.AMQPURL)
	if err != nil {
		return nil, err
	}
	return node.StartScheduler(ctx, node.SchedulerConfig{Server: cfg, Listen: env.Schedulers[0], AMQPURL: env.AMQPURL, AMQPTLS: amqpTLS,
		SeenPath: filepath.Join("data", "seen", "scheduler-0"), Log: log, TLS: serverTLS, InsecurePlaintext: sec.InsecurePlaintext, Metrics: reg})
}

func metricsURL(s *metrics.Server) string {
	if s == nil {
		return "off"
	}
	return s.URL()
}

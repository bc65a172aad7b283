// Command scheduler runs a drover scheduler: it leases the URLs of the
// RabbitMQ frontier to fetcher sessions, by priority and at the pace
// politeness allows. Run one or more (-index i -replicas k).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/tlsconf"

	// Pebble's C allocations in two malloc arenas, not one per thread.
	_ "github.com/drover-crawl/drover/internal/cmalloc"
)

func main() { os.Exit(run()) }

// run is the command; it returns the exit status, so that its defers
// (closing the metrics server, the in-process scheduler, the Temporal
// client) run on every path.
func run() int {
	env := envconf.Load(os.Getenv)
	envconf.DefaultGC(os.Getenv, envconf.SchedulerGCPercent)
	cfg := frontier.DefaultServerConfig()
	serverFlags(flag.CommandLine, &cfg, env)
	listen := flag.String("listen", env.Schedulers[0], "address to listen on")
	metricsAddr := flag.String("metrics-addr", metrics.DefaultSchedulerAddr, "serve Prometheus metrics on `ADDR`/metrics (\"off\": none)")
	so := seenFlags(flag.CommandLine)
	pprofAddr := flag.String("pprof-addr", "", "serve Go's profiles (net/http/pprof) on `ADDR`/debug/pprof/ (empty: off; bind loopback)")
	sec := tlsconf.FromEnv(nil)
	sec.Flags(flag.CommandLine, true)
	flag.Parse()
	if cfg.Name == "" {
		cfg.Name = fmt.Sprintf("scheduler-%d", cfg.Index)
	}
	serverTLS, err := sec.Server()
	if err == nil {
		err = peers(&cfg, env.Schedulers, *listen, sec, serverTLS != nil)
	}
	if err == nil {
		err = so.check(cfg.Name)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if cfg.Token = env.Token; env.DevToken {
		log.Warn("DROVER_TOKEN unset: using the documented dev token (loopback only)")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	reg := metrics.NewRegistry()
	ms, err := metrics.Serve(*metricsAddr, reg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err, "(set --metrics-addr)")
		return 1
	}
	defer ms.Close()
	ps, err := metrics.ServeProfiles(*pprofAddr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err, "(set --pprof-addr)")
		return 1
	}
	defer ps.Close()
	amqpTLS, err := sec.AMQPTLS(env.AMQPURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		return 2
	}
	s, err := node.StartScheduler(ctx, node.SchedulerConfig{Server: cfg, Listen: *listen, AMQPURL: env.AMQPURL, AMQPTLS: amqpTLS, SeenPath: so.path, SeenMemTableBytes: so.memTable, SeenCacheBytes: so.cache, SeenL0Tables: so.l0Tables, Log: log,
		TLS: serverTLS, InsecurePlaintext: sec.InsecurePlaintext, Metrics: reg})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		return 1
	}
	metricsURL := "off"
	if ms != nil {
		metricsURL = ms.URL()
	}
	log.Info("scheduler listening", "addr", s.Addr(), "self", cfg.Self, "peers", len(cfg.Peers), "index", cfg.Index, "replicas", cfg.Replicas, "metrics", metricsURL, "tls", serverTLS != nil, "mtls", sec.ClientCA != "")
	select {
	case <-ctx.Done():
		s.Close()
	case err := <-s.Done():
		s.Close()
		fmt.Fprintln(os.Stderr, "scheduler:", err)
		return 1
	}
	return 0
}

// serverFlags binds the flags of cfg, the scheduler server's settings
// (defaults: cfg's, and env's queue type).
func serverFlags(fs *flag.FlagSet, cfg *frontier.ServerConfig, env envconf.Env) {
	fs.StringVar(&cfg.Name, "name", "", "scheduler name (default: scheduler-INDEX)")
	fs.IntVar(&cfg.Index, "index", 0, "this scheduler's index among -replicas")
	fs.IntVar(&cfg.Replicas, "replicas", 1, "number of schedulers sharing the campaigns")
	fs.StringVar(&cfg.Self, "self", "", "this scheduler's address among $DROVER_SCHEDULER, where the others reach it for the IP keys it owns (default: -listen when listed, else the -index'th)")
	fs.IntVar(&cfg.Prefetch, "prefetch", cfg.Prefetch, "URLs held per shard consumer (RabbitMQ counts messages: prefetch/batch of them, at least min(prefetch, 64))")
	fs.IntVar(&cfg.Batch, "batch", cfg.Batch, "new links of one shard queue per RabbitMQ message (1: one URL a message)")
	fs.StringVar(&cfg.QueueType, "queue-type", env.QueueType, "shard queue type of a campaign that names none: quorum or classic (default $DROVER_QUEUE_TYPE, else quorum when AMQP_URL names several nodes, classic for one)")
	fs.DurationVar(&cfg.RobotsTTL, "robots-ttl", cfg.RobotsTTL, "how long a host's robots.txt is trusted; then it is fetched again before the host's next page (at least 1s)")
	fs.DurationVar(&cfg.RevisitPoll, "revisit-poll", cfg.RevisitPoll, "how often a continuous campaign's revisit schedule is read for the URLs due, and how far ahead they are released (10ms-1m)")
	fs.DurationVar(&cfg.HostIdle, "host-idle", cfg.HostIdle, "how long a host with nothing queued or in flight keeps its state (robots.txt rules, politeness) before the scheduler forgets it; its next URL fetches robots.txt again (0: at once; negative: never)")
	fs.IntVar(&cfg.RecordBacklog, "record-backlog", cfg.RecordBacklog, "outcomes and their links waiting to be recorded past which the scheduler grants no lease until records catch up (bounds its memory when recording falls behind)")
	fs.Int64Var(&cfg.QueuedCacheBytes, "queued-cache-bytes", cfg.QueuedCacheBytes, "memory for the links known to be queued, answered without a seen-store lookup, shared by every campaign (0: none)")
}

// seenOptions are the seen store's flags.
type seenOptions struct {
	path            string
	memTable, cache int64
	l0Tables        int
}

func seenFlags(fs *flag.FlagSet) *seenOptions {
	o := &seenOptions{}
	fs.StringVar(&o.path, "seen", "", "seen-set directory (default data/seen/NAME; \"mem\" keeps it in memory)")
	fs.Int64Var(&o.memTable, "seen-memtable-bytes", 0, "the seen store's memtable size (0: Pebble's default, 4 MB); small ones flush and compact often")
	fs.IntVar(&o.l0Tables, "seen-l0-tables", seen.DefaultL0CompactionThreshold, "tables the seen store's level 0 gathers before a compaction (Pebble's default is 4: more compactions, fewer tables to read)")
	fs.Int64Var(&o.cache, "seen-cache-bytes", seen.DefaultCacheBytes, "the seen store's block cache (Pebble's; its Bloom filters and index blocks first; at least 1 MiB)")
	return o
}

// check checks the flags and sets the directory of the scheduler named
// name ("" in memory).
func (o *seenOptions) check(name string) error {
	switch {
	case o.memTable < 0:
		return errors.New("-seen-memtable-bytes must be 0 (the default) or more")
	case o.l0Tables < 1:
		return errors.New("-seen-l0-tables must be at least 1")
	case o.cache < 1<<20:
		return errors.New("-seen-cache-bytes must be at least 1 MiB")
	case o.path == "":
		o.path = filepath.Join("data", "seen", name)
	case o.path == "mem":
		o.path = ""
	}
	return nil
}

// peers sets how cfg's scheduler reaches the others, which own IP keys:
// their addresses, its own among them, and, when it serves TLS, a client
// TLS config from the same options.
func peers(cfg *frontier.ServerConfig, schedulers []string, listen string, sec tlsconf.Options, serveTLS bool) error {
	cfg.Peers, cfg.Self = schedulers, selfAddr(cfg.Self, listen, schedulers, cfg.Index)
	cfg.PeerInsecurePlaintext = sec.InsecurePlaintext
	if serveTLS {
		var err error
		cfg.PeerTLS, err = sec.Client()
		return err
	}
	return nil
}

// selfAddr is this scheduler's address among peers: self when given, else
// listen when peers name it, else the index'th peer.
func selfAddr(self, listen string, peers []string, index int) string {
	switch {
	case self != "":
		return self
	case slices.Contains(peers, listen):
		return listen
	case index < len(peers):
		return peers[index]
	}
	return ""
}

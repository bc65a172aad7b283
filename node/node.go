// Package node wires a drover scheduler over RabbitMQ; its subpackage
// temporalnode wires the Temporal workers that host the Campaign workflow
// and its activities. The mains (worker/, scheduler/), the dev stack and
// the integration tests all start their pieces through them, so they are
// wired one way only. node links no Temporal code: the scheduler's binary,
// which has no Temporal client, is the smaller for it.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"

	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/tlsconf"
)

// SchedulerConfig configures a scheduler process.
type SchedulerConfig struct {
	Server  frontier.ServerConfig
	Listen  string
	AMQPURL string
	// SeenPath is the seen-set directory (seen.Pebble); empty keeps
	// it in memory.
	SeenPath string
	// SeenMemTableBytes is the seen store's memtable (0: Pebble's default);
	// SeenCacheBytes its block cache (0: seen.DefaultCacheBytes).
	SeenMemTableBytes, SeenCacheBytes int64
	// SeenL0Tables is its level 0 before a compaction (0:
	// seen.DefaultL0CompactionThreshold).
	SeenL0Tables int
	Log          *slog.Logger
	// Metrics, when set, gets the scheduler's metrics (drover_scheduler_*).
	Metrics prometheus.Registerer
	// TLS, when set, serves every session over TLS (tlsconf.Options.Server);
	// nil is plaintext, refused on a non-loopback address unless
	// InsecurePlaintext.
	TLS               *tls.Config
	InsecurePlaintext bool
	// AMQPTLS is the TLS config of an amqps:// AMQPURL (tlsconf.AMQPTLS);
	// nil takes amqp091's default (the system's CAs).
	AMQPTLS *tls.Config
}

// Scheduler is a running scheduler.
type Scheduler struct {
	srv   *frontier.Server
	store seen.Store
	ln    net.Listener
	done  chan error
}

// amqpDialer dials the nodes of amqpURL (envconf.AMQPAddrs) in turn: each
// call starts from the node it reached last, and goes on to the next when
// that one does not answer, so that the connections of a node that died
// move to another one.
func amqpDialer(amqpURL string, tlsConfig *tls.Config, log *slog.Logger) func() (*amqp.Connection, error) {
	addrs := envconf.AMQPAddrs(amqpURL)
	var mu sync.Mutex
	next := 0
	return func() (*amqp.Connection, error) {
		if len(addrs) == 0 {
			return nil, errors.New("AMQP_URL names no RabbitMQ node")
		}
		mu.Lock()
		defer mu.Unlock()
		var errs []error
		for range addrs {
			u := addrs[next%len(addrs)]
			ac := amqp.Config{Dial: amqp.DefaultDial(10 * time.Second), Heartbeat: 10 * time.Second}
			if tlsConfig != nil {
				ac.TLSClientConfig = tlsConfig.Clone() // amqp091 sets its ServerName
			}
			conn, err := amqp.DialConfig(u, ac)
			if err == nil {
				return conn, nil
			}
			var aerr *amqp.Error
			if errors.As(err, &aerr) && aerr.Code == amqp.AccessRefused {
				return nil, err
			}
			errs = append(errs, fmt.Errorf("%s: %w", campaign.Redact(u), err))
			next++
			if log != nil && len(addrs) > 1 {
				log.Warn("RabbitMQ node unreachable; trying the next", "url", campaign.Redact(u), "err", err)
			}
		}
		if len(errs) == 1 {
			return nil, errors.Unwrap(errs[0])
		}
		return nil, errors.Join(errs...)
	}
}

// redactAMQP is an AMQP_URL without its passwords, node by node.
func redactAMQP(amqpURL string) string {
	var out []string
	for _, u := range envconf.AMQPAddrs(amqpURL) {
		out = append(out, campaign.Redact(u))
	}
	return strings.Join(out, ",")
}

// StartScheduler dials RabbitMQ, opens the seen-set, listens and serves.
func StartScheduler(ctx context.Context, cfg SchedulerConfig) (*Scheduler, error) {
	if cfg.Server.Token == session.DevToken && !tlsconf.IsLoopbackAddr(cfg.Listen) {
		return nil, fmt.Errorf("scheduler on %s: refusing the dev token on a non-loopback address; set DROVER_TOKEN", cfg.Listen)
	}
	if err := tlsconf.CheckListen(cfg.Listen, cfg.TLS != nil, cfg.InsecurePlaintext); err != nil {
		return nil, fmt.Errorf("scheduler: %w", err)
	}
	switch cfg.Server.QueueType {
	case "":
		cfg.Server.QueueType = envconf.DefaultQueueType(cfg.AMQPURL)
	case frontier.QueueQuorum, frontier.QueueClassic:
	default:
		return nil, fmt.Errorf("scheduler: queue type %q (-queue-type, DROVER_QUEUE_TYPE): must be quorum or classic", cfg.Server.QueueType)
	}
	dial := amqpDialer(cfg.AMQPURL, cfg.AMQPTLS, cfg.Log)
	// RabbitMQ may come up after the scheduler (a compose or Kubernetes
	// start): wait for it, saying so, until ctx ends. Wrong credentials are
	// a configuration error and end the wait at once.
	for wait := time.Second; ; wait = min(2*wait, 10*time.Second) {
		conn, err := dial()
		if err == nil {
			conn.Close()
			break
		}
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.AccessRefused {
			return nil, fmt.Errorf("RabbitMQ at %s refused the credentials: %w (check AMQP_URL)", redactAMQP(cfg.AMQPURL), err)
		}
		if cfg.Log != nil {
			cfg.Log.Warn("waiting for RabbitMQ", "url", redactAMQP(cfg.AMQPURL), "err", err, "retry_in", wait)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("RabbitMQ at %s unreachable: %w (start it with `rabbitmq-server -detached`, or set AMQP_URL)", redactAMQP(cfg.AMQPURL), err)
		case <-time.After(wait):
		}
	}
	var store seen.Store = seen.NewMemory()
	if cfg.SeenPath != "" {
		var err error
		if store, err = seen.OpenPebble(cfg.SeenPath, seen.PebbleOptions{Log: cfg.Log, MemTableBytes: cfg.SeenMemTableBytes, CacheBytes: cfg.SeenCacheBytes, L0Tables: cfg.SeenL0Tables}); err != nil {
			return nil, err
		}
	}
	srv, err := frontier.NewServerDial(cfg.Server, dial, store, cfg.Log)
	if err != nil {
		store.Close()
		return nil, err
	}
	if cfg.Metrics != nil {
		if err := srv.RegisterMetrics(cfg.Metrics); err != nil {
			srv.Close()
			store.Close()
			return nil, fmt.Errorf("scheduler metrics: %w", err)
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		srv.Close()
		store.Close()
		return nil, fmt.Errorf("scheduler listen on %s: %w", cfg.Listen, err)
	}
	if cfg.TLS != nil {
		ln = tls.NewListener(ln, cfg.TLS)
	}
	s := &Scheduler{srv: srv, store: store, ln: ln, done: make(chan error, 1)}
	go func() {
		err := srv.Serve(ln)
		if err == nil {
			err = errors.New("scheduler stopped")
		}
		s.done <- err
	}()
	return s, nil
}

// Addr is the address the scheduler listens on.
func (s *Scheduler) Addr() string { return s.ln.Addr().String() }

// Server is the scheduler's frontier server.
func (s *Scheduler) Server() *frontier.Server { return s.srv }

// Done delivers the error that ended the scheduler (its listener closed). A
// lost RabbitMQ connection does not end it: it is dialled again.
func (s *Scheduler) Done() <-chan error { return s.done }

// Close stops the scheduler; its held deliveries go back to RabbitMQ.
func (s *Scheduler) Close() error {
	err := s.srv.Close()
	s.store.Close()
	return err
}

// Package nodetest runs a scheduler in-process for tests, one way for
// every package whose tests need a real one (over the machine's RabbitMQ,
// on a free loopback port).
package nodetest

import (
	"cmp"
	"context"
	"log/slog"
	"os"
	"reflect"
	"testing"

	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
)

// NewScheduler starts an in-process scheduler with what cfg leaves out
// filled in: the default server config, a free loopback port, AMQP_URL's
// RabbitMQ (envconf's default when unset), and warnings and errors logged
// to stderr. The caller closes it.
func NewScheduler(cfg node.SchedulerConfig) (*node.Scheduler, error) {
	if reflect.ValueOf(cfg.Server).IsZero() {
		cfg.Server = frontier.DefaultServerConfig()
	}
	cfg.Listen = cmp.Or(cfg.Listen, "127.0.0.1:0")
	cfg.AMQPURL = cmp.Or(cfg.AMQPURL, envconf.Load(os.Getenv).AMQPURL)
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return node.StartScheduler(context.Background(), cfg)
}

// StartScheduler is NewScheduler for a scheduler closed at the end of the
// test (again, if the test closed it already); an error to start fails
// the test. It skips the test under -short (testenv.NeedsRabbitMQ).
func StartScheduler(t testing.TB, cfg node.SchedulerConfig) *node.Scheduler {
	t.Helper()
	testenv.NeedsRabbitMQ(t)
	sched, err := NewScheduler(cfg)
	if err != nil {
		t.Fatalf("starting a scheduler: %v", err)
	}
	t.Cleanup(func() { sched.Close() })
	return sched
}

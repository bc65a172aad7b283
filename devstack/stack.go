package devstack

import (
	"context"
	"errors"
	"fmt"
	"github.com/drover-crawl/drover/campaign"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/node"
)

// StackOptions configures the dev stack. The zero value is `make dev`:
// DESIGN.md's default addresses, Temporal's state in data/temporal.db.
type StackOptions struct {
	// DataDir holds temporal.db, Kafka's log (kafka/) and the scheduler's
	// seen-set (seen/) (default "data").
	DataDir       string
	TemporalIP    string // default 127.0.0.1
	TemporalPort  int    // default 7233
	UIPort        int    // default 8233
	KafkaAddr     string // default 127.0.0.1:9092
	SchedulerAddr string // default 127.0.0.1:7420
	AMQPURL       string // default amqp://guest:guest@127.0.0.1:5672/
	Token         string // default frontier.DevToken
	Log           *slog.Logger
}

func (o *StackOptions) defaults() {
	if o.DataDir == "" {
		o.DataDir = "data"
	}
	if o.TemporalIP == "" {
		o.TemporalIP = DefaultTemporalIP
	}
	if o.TemporalPort == 0 {
		o.TemporalPort = 7233
	}
	if o.UIPort == 0 {
		o.UIPort = 8233
	}
	if o.KafkaAddr == "" {
		o.KafkaAddr = "127.0.0.1:9092"
	}
	if o.SchedulerAddr == "" {
		o.SchedulerAddr = "127.0.0.1:7420"
	}
	if o.AMQPURL == "" {
		o.AMQPURL = "amqp://guest:guest@127.0.0.1:5672/"
	}
	if o.Token == "" {
		o.Token = frontier.DevToken
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
}

// Stack is the dev stack running in this process: the Temporal dev server
// (a child process), in-memory Kafka, a scheduler and the workers.
type Stack struct {
	Temporal  *Temporal
	Kafka     *Kafka
	Scheduler *node.Scheduler
	Workers   *node.Workers
	Opts      StackOptions
}

// StartStack checks that every port it needs is free (saying by what it is
// taken if not), makes sure RabbitMQ runs, and starts everything.
func StartStack(ctx context.Context, opts StackOptions) (*Stack, error) {
	opts.defaults()
	for _, p := range []struct{ addr, env string }{
		{net.JoinHostPort(opts.TemporalIP, strconv.Itoa(opts.TemporalPort)), "TEMPORAL_ADDRESS"},
		{net.JoinHostPort(opts.TemporalIP, strconv.Itoa(opts.UIPort)), "TEMPORAL_UI_PORT"},
		{opts.KafkaAddr, "KAFKA_BROKERS"},
		{opts.SchedulerAddr, "DROVER_SCHEDULER"},
	} {
		if err := CheckPortFreeFor(p.addr, p.env); err != nil {
			return nil, err
		}
	}
	if err := EnsureTemporalBinary(); err != nil {
		return nil, err
	}
	if err := EnsureRabbitMQ(ctx, opts.AMQPURL); err != nil {
		return nil, err
	}
	s := &Stack{Opts: opts}
	var err error
	s.Temporal, err = StartTemporal(ctx, TemporalOptions{
		IP: opts.TemporalIP, Port: opts.TemporalPort, UIPort: opts.UIPort,
		DBFilename: filepath.Join(opts.DataDir, "temporal.db"),
	})
	if err != nil {
		return nil, err
	}
	if s.Kafka, err = StartKafkaWith(KafkaOptions{Addr: opts.KafkaAddr, DataDir: filepath.Join(opts.DataDir, "kafka"), Topics: []string{KafkaPagesTopic}}); err != nil {
		s.Stop()
		return nil, err
	}
	sc := frontier.DefaultServerConfig()
	sc.Token = opts.Token
	s.Scheduler, err = node.StartScheduler(ctx, node.SchedulerConfig{
		Server: sc, Listen: opts.SchedulerAddr, AMQPURL: opts.AMQPURL,
		SeenPath: filepath.Join(opts.DataDir, "seen", "scheduler-0"), Log: opts.Log,
	})
	if err != nil {
		s.Stop()
		return nil, err
	}
	s.Workers, err = node.StartWorkers(s.Temporal.Client(), node.WorkerConfig{Activities: activities.Activities{
		Schedulers: []string{s.Scheduler.Addr()}, Token: opts.Token, KafkaBrokers: s.Kafka.Addr(), Identity: "dev-worker",
	}})
	if err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// Stop stops everything that started, workers first so that sessions
// report their last outcomes.
func (s *Stack) Stop() error {
	var errs []error
	if s.Workers != nil {
		s.Workers.Stop()
	}
	if s.Scheduler != nil {
		errs = append(errs, s.Scheduler.Close())
	}
	if s.Kafka != nil {
		s.Kafka.Close()
	}
	if s.Temporal != nil {
		errs = append(errs, s.Temporal.Stop())
	}
	return errors.Join(errs...)
}

// Describe is what the stack tells its user.
func (s *Stack) Describe() string {
	return fmt.Sprintf(`drover dev stack
  Temporal   %s  (Web UI %s, state in %s)
  Kafka      %s  (log in %s, kept across restarts; topic %s)
  RabbitMQ   %s
  scheduler  %s
  worker     dev-worker (task queues drover-campaign, drover-fetch)
export TEMPORAL_ADDRESS=%s KAFKA_BROKERS=%s DROVER_SCHEDULER=%s`,
		s.Temporal.Address(), s.Temporal.UIURL(), filepath.Join(s.Opts.DataDir, "temporal.db"),
		s.Kafka.Addr(), filepath.Join(s.Opts.DataDir, "kafka"), KafkaPagesTopic, campaign.Redact(s.Opts.AMQPURL), s.Scheduler.Addr(),
		s.Temporal.Address(), s.Kafka.Addr(), s.Scheduler.Addr())
}

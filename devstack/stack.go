package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// StackReadyTimeout bounds StartStack's wait for every process to answer.
const StackReadyTimeout = 2 * time.Minute

// DevWorkerIdentity is the identity of the dev stack's worker.
const DevWorkerIdentity = "dev-worker"

// StackOptions configures the dev stack. The zero value is `make dev`:
// the default addresses (envconf's), state under data/.
type StackOptions struct {
	// DataDir holds temporal.db, Kafka's log (kafka/), the scheduler's
	// seen-set (seen/) and the processes' logs (log/) (default "data").
	DataDir       string
	TemporalIP    string // default 127.0.0.1
	TemporalPort  int    // default 7233
	UIPort        int    // default 8233; -1 runs Temporal without its Web UI
	KafkaAddr     string // default 127.0.0.1:9092
	SchedulerAddr string // default 127.0.0.1:7420
	AMQPURL       string // default amqp://guest:guest@127.0.0.1:5672/
	Token         string // default session.DevToken
	// WorkerMetricsAddr and SchedulerMetricsAddr are the processes'
	// --metrics-addr (default metrics.DefaultWorkerAddr and
	// metrics.DefaultSchedulerAddr, loopback).
	WorkerMetricsAddr    string
	SchedulerMetricsAddr string
	// SchedulerArgs and WorkerArgs are more flags for the processes (as
	// -pprof-addr), and SchedulerEnv and WorkerEnv more of their
	// environment (NAME=value, e.g. GOMEMLIMIT), for a benchmark to try
	// settings or read profiles.
	SchedulerArgs, WorkerArgs []string
	SchedulerEnv, WorkerEnv   []string
	// BinDir receives the worker, scheduler and kafka binaries, built at
	// every start (Go's cache makes a rebuild quick); default out/dev in
	// the repository root.
	BinDir string
	// Out receives the supervisor's messages: a process that exited, its
	// last log lines, its restart (default os.Stderr).
	Out io.Writer
	// Log is the logger of the stack's own Temporal client (default
	// slog.Default()).
	Log *slog.Logger
}

func (o *StackOptions) defaults() error {
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
	if o.WorkerMetricsAddr == "" {
		o.WorkerMetricsAddr = metrics.DefaultWorkerAddr
	}
	if o.SchedulerMetricsAddr == "" {
		o.SchedulerMetricsAddr = metrics.DefaultSchedulerAddr
	}
	if o.AMQPURL == "" {
		o.AMQPURL = "amqp://guest:guest@127.0.0.1:5672/"
	}
	if o.Token == "" {
		o.Token = session.DevToken
	}
	if o.Out == nil {
		o.Out = os.Stderr
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	var err error
	if o.DataDir, err = filepath.Abs(o.DataDir); err != nil {
		return err
	}
	if o.BinDir == "" {
		root, err := RepoRoot(".")
		if err != nil {
			return err
		}
		o.BinDir = filepath.Join(root, "out", "dev")
	}
	return nil
}

// Stack is the dev stack: Temporal, Kafka, a scheduler and a worker, each a
// process of its own, kept running by a supervisor in this process.
type Stack struct {
	Opts StackOptions
	// The supervised processes; each is restarted when it exits.
	Temporal, Kafka, Scheduler, Worker *Child

	sup    *Supervisor
	client client.Client
}

// StartStack checks that every port it needs is free (saying by what it is
// taken if not), makes sure RabbitMQ runs, builds the binaries, starts
// every process and returns once each one answers.
func StartStack(ctx context.Context, opts StackOptions) (*Stack, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	temporalAddr := net.JoinHostPort(opts.TemporalIP, strconv.Itoa(opts.TemporalPort))
	ports := []struct{ addr, env string }{
		{temporalAddr, "TEMPORAL_ADDRESS"},
		{opts.KafkaAddr, "KAFKA_BROKERS"},
		{opts.SchedulerAddr, "DROVER_SCHEDULER"},
		{opts.WorkerMetricsAddr, ""},
		{opts.SchedulerMetricsAddr, ""},
	}
	if opts.UIPort > 0 {
		ports = append(ports, struct{ addr, env string }{net.JoinHostPort(opts.TemporalIP, strconv.Itoa(opts.UIPort)), "TEMPORAL_UI_PORT"})
	}
	for _, p := range ports {
		if err := CheckPortFreeFor(p.addr, p.env); err != nil {
			return nil, err
		}
	}
	temporalBin, err := TemporalBinary()
	if err != nil {
		return nil, err
	}
	if err := EnsureRabbitMQ(ctx, opts.AMQPURL); err != nil {
		return nil, err
	}
	if err := BuildDevBinaries(ctx, opts.BinDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.DataDir, 0o755); err != nil {
		return nil, err
	}

	s := &Stack{Opts: opts, sup: NewSupervisor(filepath.Join(opts.DataDir, "log"), opts.Out)}
	temporalArgs := TemporalServerArgs(opts.TemporalIP, opts.TemporalPort, opts.UIPort, filepath.Join(opts.DataDir, "temporal.db"))
	bin := func(name string) string { return filepath.Join(opts.BinDir, name) }
	schedArgs := append([]string{"-listen", opts.SchedulerAddr, "-metrics-addr", opts.SchedulerMetricsAddr, "-name", "scheduler-0",
		"-seen", filepath.Join(opts.DataDir, "seen", "scheduler-0")}, opts.SchedulerArgs...)
	workerArgs := append([]string{"-identity", DevWorkerIdentity, "-metrics-addr", opts.WorkerMetricsAddr}, opts.WorkerArgs...)
	specs := []struct {
		child *(*Child)
		spec  ProcSpec
	}{
		{&s.Temporal, ProcSpec{Name: "temporal", Path: temporalBin, Args: temporalArgs, StopSignal: syscall.SIGINT}},
		{&s.Kafka, ProcSpec{Name: "kafka", Path: bin("kafka"), Args: []string{
			"-listen", opts.KafkaAddr, "-data", filepath.Join(opts.DataDir, "kafka"), "-topics", KafkaPagesTopic}}},
		{&s.Scheduler, ProcSpec{Name: "scheduler", Path: bin("scheduler"), Args: schedArgs,
			Env: append([]string{"AMQP_URL=" + opts.AMQPURL, "DROVER_TOKEN=" + opts.Token}, opts.SchedulerEnv...)}},
		{&s.Worker, ProcSpec{Name: "worker", Path: bin("worker"), Args: workerArgs,
			Env: append([]string{"TEMPORAL_ADDRESS=" + temporalAddr, "TEMPORAL_NAMESPACE=" + DefaultTemporalNamespace,
				"KAFKA_BROKERS=" + opts.KafkaAddr, "DROVER_SCHEDULER=" + opts.SchedulerAddr, "DROVER_TOKEN=" + opts.Token}, opts.WorkerEnv...)}},
	}
	for _, sp := range specs {
		c, err := s.sup.Start(sp.spec)
		if err != nil {
			s.Stop()
			return nil, err
		}
		*sp.child = c
	}
	if err := s.waitReady(ctx); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// TemporalServerArgs are the arguments of `temporal server start-dev` for a
// server on ip:port with its state in dbFile, its Web UI on uiPort (none
// when uiPort <= 0), the default namespace and drover's search attributes.
// The SQLite file runs in WAL mode with synchronous=NORMAL (temporalPragmas).
func TemporalServerArgs(ip string, port, uiPort int, dbFile string) []string {
	args := []string{
		"server", "start-dev", "--ip", ip, "--port", strconv.Itoa(port),
		"--namespace", DefaultTemporalNamespace, "--db-filename", dbFile,
		"--log-level", "warn", "--dynamic-config-value", "frontend.enableServerVersionCheck=false",
		"--search-attribute", workflows.SearchAttributeState + "=Keyword",
		"--search-attribute", workflows.SearchAttributePages + "=Int",
	}
	for _, p := range temporalPragmas {
		args = append(args, "--sqlite-pragma", p)
	}
	if uiPort > 0 {
		return append(args, "--ui-port", strconv.Itoa(uiPort))
	}
	return append(args, "--headless")
}

// temporalPragmas set the dev server's SQLite file to write-ahead logging
// without an fsync per commit. SQLite's default (a rollback journal,
// synchronous=FULL) syncs the journal and the file on every transaction,
// and the dev server commits one for every activity heartbeat: eight
// fetchers heartbeated 16 times a second before heartbeats were
// throttled (now one each per 5 s, temporalnode.HeartbeatThrottle), and every workflow task commits too. In WAL mode with NORMAL a commit
// is an append to the -wal file, synced at checkpoints: a crash of any
// process, Temporal's included, loses nothing committed (the OS holds the
// writes; TestDevStackRestartsAKilledScheduler SIGKILLs it); a crash of
// the machine itself may lose the last commits, a trade made for the dev
// stack only (a production cluster keeps its own database). Measured in
// bench/README.md ("Session 8"): the dev server's syscalls per page
// 0.9 -> 0.5, its CPU per page -30%.
var temporalPragmas = []string{"journal_mode=WAL", "synchronous=NORMAL"}

// BuildDevBinaries builds the worker, scheduler and kafka commands into dir.
func BuildDevBinaries(ctx context.Context, dir string) error {
	root, err := RepoRoot(".")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := Build(ctx, root, dir, "worker", "scheduler", "devstack/cmd/kafka"); err != nil {
		return fmt.Errorf("building the dev stack's binaries into %s: %w", dir, err)
	}
	return nil
}

// waitReady waits until Temporal, Kafka, the scheduler and the worker
// answer, naming the one that does not and the end of its log.
func (s *Stack) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, StackReadyTimeout)
	defer cancel()
	c, err := temporalnode.DialTemporal(ctx, client.Options{HostPort: s.TemporalAddr(), Namespace: DefaultTemporalNamespace,
		Logger: log.NewStructuredLogger(slog.New(node.QuietCancels(s.Opts.Log.Handler())))}, nil)
	if err != nil {
		return s.notReady(s.Temporal, err)
	}
	s.client = c
	checks := []struct {
		child *Child
		check func(context.Context) error
	}{
		{s.Kafka, func(ctx context.Context) error { return CheckKafka(ctx, []string{s.KafkaAddr()}) }},
		{s.Scheduler, func(ctx context.Context) error {
			cc, err := session.Client{Token: s.Opts.Token}.DialControl(ctx, s.SchedulerAddr())
			if err != nil {
				return err
			}
			return cc.Close()
		}},
		{s.Worker, func(ctx context.Context) error {
			resp, err := c.DescribeTaskQueue(ctx, workflows.TaskQueue, enums.TASK_QUEUE_TYPE_WORKFLOW)
			if err != nil {
				return err
			}
			for _, p := range resp.GetPollers() {
				if p.GetIdentity() == DevWorkerIdentity {
					return nil
				}
			}
			return errors.New("not polling its task queue yet")
		}},
		{s.Scheduler, func(ctx context.Context) error { return CheckHTTP(ctx, s.SchedulerMetricsURL()) }},
		{s.Worker, func(ctx context.Context) error { return CheckHTTP(ctx, s.WorkerMetricsURL()) }},
	}
	for _, ch := range checks {
		for {
			actx, acancel := context.WithTimeout(ctx, 5*time.Second)
			err := ch.check(actx)
			acancel()
			if err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return s.notReady(ch.child, err)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func (s *Stack) notReady(c *Child, err error) error {
	return fmt.Errorf("%s did not answer within %s: %s; the end of %s:\n%s",
		c.Name(), StackReadyTimeout, oneLine(err), c.LogPath(), indent(Tail(c.LogPath(), 10)))
}

// Client is a client of the stack's Temporal; it reconnects by itself when
// the server restarts. Stop closes it.
func (s *Stack) Client() client.Client { return s.client }

// TemporalAddr is Temporal's frontend, for TEMPORAL_ADDRESS.
func (s *Stack) TemporalAddr() string {
	return net.JoinHostPort(s.Opts.TemporalIP, strconv.Itoa(s.Opts.TemporalPort))
}

// UIURL is the Web UI's URL, or "" without it.
func (s *Stack) UIURL() string {
	if s.Opts.UIPort <= 0 {
		return ""
	}
	return "http://" + net.JoinHostPort(s.Opts.TemporalIP, strconv.Itoa(s.Opts.UIPort))
}

// WorkerMetricsURL is the worker's Prometheus endpoint.
func (s *Stack) WorkerMetricsURL() string { return "http://" + s.Opts.WorkerMetricsAddr + metrics.Path }

// SchedulerMetricsURL is the scheduler's Prometheus endpoint.
func (s *Stack) SchedulerMetricsURL() string {
	return "http://" + s.Opts.SchedulerMetricsAddr + metrics.Path
}

// CheckHTTP says whether url answers a GET with 200 OK (a metrics
// endpoint, the Web UI, Prometheus's /-/ready), and if not what it did.
func CheckHTTP(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// KafkaAddr is the broker, for KAFKA_BROKERS.
func (s *Stack) KafkaAddr() string { return s.Opts.KafkaAddr }

// SchedulerAddr is the scheduler, for DROVER_SCHEDULER.
func (s *Stack) SchedulerAddr() string { return s.Opts.SchedulerAddr }

// Stop stops every process, the worker first so that its sessions report
// their last outcomes, Temporal last.
func (s *Stack) Stop() error {
	if s.client != nil {
		s.client.Close()
	}
	s.sup.Stop()
	return nil
}

// Describe is what the stack tells its user.
func (s *Stack) Describe() string {
	ui := s.UIURL()
	if ui == "" {
		ui = "none"
	}
	return fmt.Sprintf(`drover dev stack (each a process of its own, restarted when it dies; logs in %s)
  Temporal   %s  (Web UI %s, state in %s)  pid %d
  Kafka      %s  (log in %s, kept across restarts; topic %s)  pid %d
  RabbitMQ   %s  (not managed by the stack)
  scheduler  %s  (seen store in %s)  pid %d
  worker     %s (task queues drover-campaign, drover-fetch)  pid %d
  metrics    scheduler %s, worker %s (Prometheus)
export TEMPORAL_ADDRESS=%s KAFKA_BROKERS=%s DROVER_SCHEDULER=%s`,
		filepath.Join(s.Opts.DataDir, "log"),
		s.TemporalAddr(), ui, filepath.Join(s.Opts.DataDir, "temporal.db"), s.Temporal.PID(),
		s.KafkaAddr(), filepath.Join(s.Opts.DataDir, "kafka"), KafkaPagesTopic, s.Kafka.PID(),
		campaign.Redact(s.Opts.AMQPURL),
		s.SchedulerAddr(), filepath.Join(s.Opts.DataDir, "seen", "scheduler-0"), s.Scheduler.PID(),
		DevWorkerIdentity, s.Worker.PID(),
		s.SchedulerMetricsURL(), s.WorkerMetricsURL(),
		s.TemporalAddr(), s.KafkaAddr(), s.SchedulerAddr())
}

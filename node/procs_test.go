package node_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier/session"
	"github.com/drover-crawl/drover/workflows"
)

// The scheduler and worker binaries, built once per test binary into binDir
// (removed by TestMain).
var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// binaries builds ./scheduler, ./worker and ./starter (without -race: they are the
// processes under test, not the test) and returns their directory.
func binaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		wd, err := os.Getwd()
		if err != nil {
			binErr = err
			return
		}
		root, err := devstack.RepoRoot(wd)
		if err != nil {
			binErr = err
			return
		}
		if binDir, err = os.MkdirTemp("", "drover-bin-"); err != nil {
			binErr = err
			return
		}
		for _, name := range []string{"scheduler", "worker", "starter"} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, name), "./"+name)
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				binErr = fmt.Errorf("go build ./%s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// testToken is the DROVER_TOKEN of the processes a test starts.
const testToken = "drover-scale-test-token"

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is a drover process a test started; its output goes to a log file
// whose tail is printed when the test fails.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error // valid after exited is closed
}

// startProc starts bin with args and the current environment plus env; it is
// SIGKILLed at the end of the test.
func startProc(t *testing.T, name, bin string, args, env []string) *proc {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	fmt.Fprintf(f, "=== %s %s (%s)\n", bin, strings.Join(args, " "), time.Now().Format(time.RFC3339Nano))
	if err := cmd.Start(); err != nil {
		f.Close()
		t.Fatalf("start %s: %v", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- tail of %s (%s):\n%s", name, logPath, tail(logPath, 40))
		}
	})
	return p
}

// kill SIGKILLs the process (if it still runs) and waits for it.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// startSchedulerProc runs the scheduler binary as replica index of replicas
// on addr with the seen-set file seen, and waits until it answers a control
// session.
func startSchedulerProc(t *testing.T, addr string, index, replicas int, seen string) *proc {
	t.Helper()
	name := fmt.Sprintf("scheduler-%d", index)
	p := startProc(t, name, filepath.Join(binaries(t), "scheduler"),
		[]string{"-listen", addr, "-index", fmt.Sprint(index), "-replicas", fmt.Sprint(replicas), "-seen", seen, "-name", name, "-metrics-addr", "127.0.0.1:0"},
		[]string{"DROVER_TOKEN=" + testToken, "AMQP_URL=" + amqpURL()})
	checkFor(t, 20*time.Second, 50*time.Millisecond, func() error {
		select {
		case <-p.exited:
			t.Fatalf("%s exited at start (%v):\n%s", name, p.err, tail(p.log, 20))
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := session.DialControl(ctx, addr, testToken)
		if err != nil {
			return err
		}
		return c.Close()
	})
	return p
}

// startWorkerProc runs the worker binary against the given schedulers,
// Temporal and Kafka.
func startWorkerProc(t *testing.T, identity string, schedulers []string, temporal, kafka string) *proc {
	t.Helper()
	return startProc(t, identity, filepath.Join(binaries(t), "worker"),
		[]string{"-identity", identity, "-metrics-addr", "127.0.0.1:0"},
		[]string{
			"DROVER_SCHEDULER=" + strings.Join(schedulers, ","),
			"DROVER_TOKEN=" + testToken,
			"TEMPORAL_ADDRESS=" + temporal,
			"KAFKA_BROKERS=" + kafka,
		})
}

// checkFor calls f every sleep until it returns nil, and fails the test
// with f's last error after wait.
func checkFor(t *testing.T, wait, sleep time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", wait, err)
		}
		time.Sleep(sleep)
	}
}

// services are what process tests share: a Temporal dev server and an
// in-memory Kafka with a topic of the test's own.
type services struct {
	temporal *devstack.Temporal
	kafka    *devstack.Kafka
	topic    string
}

func startServices(t *testing.T) *services {
	t.Helper()
	tmp, err := devstack.StartTemporal(context.Background(), devstack.TemporalOptions{UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmp.Stop() })
	topic := fmt.Sprintf("pages-%d", rand.IntN(1e9))
	k, err := devstack.StartKafka("127.0.0.1:0", topic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return &services{temporal: tmp, kafka: k, topic: topic}
}

// runCampaign starts cfg's campaign and returns a func that waits (at most
// wait) for it to end and returns its final status.
func runCampaign(t *testing.T, c client.Client, cfg campaign.Config, wait time.Duration) func() workflows.Status {
	t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: cfg.ID, TaskQueue: workflows.TaskQueue,
	}, workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return func() workflows.Status {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		var st workflows.Status
		if err := run.Get(ctx, &st); err != nil {
			t.Fatalf("campaign %s: %v", cfg.ID, err)
		}
		if st.State != campaign.StateCompleted {
			t.Fatalf("campaign %s: state %s (%s), want completed", cfg.ID, st.State, st.Reason)
		}
		return st
	}
}

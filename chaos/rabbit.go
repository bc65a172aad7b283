package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
)

// RabbitNode is a RabbitMQ node of the suite's own: its own node name,
// port, data and log directories, started from the machine's
// rabbitmq-server under a supervisor that starts it again when it dies.
// The machine's broker serves others and is never touched.
type RabbitNode struct {
	Name   string // node name, name@localhost
	URL    string // amqp URL
	dir    string
	ownDir bool // dir was made by StartRabbitNode, and Stop removes it
	sup    *devstack.Supervisor
	proc   *devstack.Child
}

// StartRabbitNode starts a private node with its state under dir (a
// temporary directory of its own, removed by Stop, when dir is "") and
// waits (bounded by ctx) until it accepts AMQP connections. The
// supervisor's messages go to out.
func StartRabbitNode(ctx context.Context, dir string, out io.Writer) (*RabbitNode, error) {
	if _, err := exec.LookPath("rabbitmq-server"); err != nil {
		return nil, fmt.Errorf("rabbitmq-server not installed (apt-get install rabbitmq-server): %w", err)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dist, err := freePort()
	if err != nil {
		return nil, err
	}
	ownDir := dir == ""
	if ownDir {
		dir, err = workDir("drover-rabbit-")
	} else {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		return nil, err
	}
	n := &RabbitNode{
		Name:   fmt.Sprintf("drover-chaos-%d@localhost", port),
		URL:    fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port),
		dir:    dir,
		ownDir: ownDir,
	}
	files := map[string]string{
		"enabled_plugins": "[].\n",
		// pause_minority: a node cut off from most of its cluster stops
		// serving (and closes its clients' connections, which move to a
		// node of the majority) until it sees them again: RabbitMQ's
		// advice for clusters of three or more.
		"rabbitmq.conf": fmt.Sprintf("listeners.tcp.local = 127.0.0.1:%d\ncluster_partition_handling = pause_minority\n", port),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
	}
	// The Debian package runs the node as the rabbitmq user (su).
	if u, err := user.Lookup("rabbitmq"); err == nil && os.Geteuid() == 0 {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		os.Chown(dir, uid, gid)
		for name := range files {
			os.Chown(filepath.Join(dir, name), uid, gid)
		}
	}
	n.sup = devstack.NewSupervisor(filepath.Join(dir, "supervisor"), out)
	n.proc, err = n.sup.Start(devstack.ProcSpec{Name: "rabbitmq", Path: "rabbitmq-server", Env: []string{
		"RABBITMQ_NODENAME=" + n.Name,
		"RABBITMQ_NODE_PORT=" + strconv.Itoa(port),
		"RABBITMQ_DIST_PORT=" + strconv.Itoa(dist),
		"RABBITMQ_CONFIG_FILE=" + filepath.Join(dir, "rabbitmq"),
		"RABBITMQ_MNESIA_BASE=" + filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE=" + filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE=" + filepath.Join(dir, "pid"),
		"RABBITMQ_ENABLED_PLUGINS_FILE=" + filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_FEATURE_FLAGS_FILE=" + filepath.Join(dir, "feature_flags"),
	}})
	if err != nil {
		return nil, err
	}
	if err := n.WaitUp(ctx); err != nil {
		n.Stop()
		return nil, err
	}
	return n, nil
}

// WaitUp waits until the node accepts an AMQP connection.
func (n *RabbitNode) WaitUp(ctx context.Context) error {
	err := await.Until(ctx, readyWithin, pollEvery, func() error {
		conn, err := amqp.DialConfig(n.URL, amqp.Config{Dial: amqp.DefaultDial(time.Second)})
		if err == nil {
			return conn.Close()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("private RabbitMQ node %s not up (logs in %s): %w", n.Name, filepath.Join(n.dir, "log"), err)
	}
	return nil
}

// Starts is how many times the node was started.
func (n *RabbitNode) Starts() int { return n.proc.Starts() }

// Kill SIGKILLs the node's Erlang VM (beam.smp); the supervisor starts the
// node again.
func (n *RabbitNode) Kill() error {
	pid := n.beamPID()
	if pid == 0 {
		return errors.New("the node's beam.smp process was not found")
	}
	return syscall.Kill(pid, syscall.SIGKILL)
}

// beamPID finds the node's Erlang VM by its environment: its command line
// does not name the node.
func (n *RabbitNode) beamPID() int {
	return findProcess(func(pid int, args []string) bool {
		if !strings.HasSuffix(args[0], "beam.smp") {
			return false
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		return err == nil && slices.Contains(strings.Split(string(env), "\x00"), "RABBITMQ_NODENAME="+n.Name)
	})
}

// Ctl runs rabbitmqctl with args against the node ("stop_app",
// "start_app"), bounded by ctx and by a minute.
func (n *RabbitNode) Ctl(ctx context.Context, args ...string) error {
	_, err := n.CtlOutput(ctx, args...)
	return err
}

// CtlOutput is Ctl, returning what rabbitmqctl printed.
func (n *RabbitNode) CtlOutput(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-q", "-n", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("rabbitmqctl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Stop stops supervising the node and shuts it down.
func (n *RabbitNode) Stop() {
	n.sup.Stop()
	if n.beamPID() != 0 {
		_ = n.Ctl(context.Background(), "shutdown")
		if pid := n.beamPID(); pid != 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	if n.ownDir {
		os.RemoveAll(n.dir)
	}
}

// workDir makes a temporary work directory that the private RabbitMQ
// node, which runs as the rabbitmq user, can traverse (MkdirTemp's 0700
// would stop it: failed_to_create_feature_flags_file_directory).
func workDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// findProcess returns the first process whose arguments match, or 0.
func findProcess(match func(pid int, args []string) bool) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		if match(pid, strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")) {
			return pid
		}
	}
	return 0
}

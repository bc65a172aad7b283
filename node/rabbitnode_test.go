package node_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// rabbitNode is a RabbitMQ node of the test's own (its own name, port and
// data directory, beside the machine's), so that the test may stop and
// start it without touching anyone else's queues.
type rabbitNode struct {
	name string
	url  string
	dir  string
}

// startRabbitNode starts a private RabbitMQ node from the machine's
// rabbitmq-server and waits (bounded) until it accepts connections.
func startRabbitNode(t *testing.T) *rabbitNode {
	t.Helper()
	if _, err := exec.LookPath("rabbitmq-server"); err != nil {
		t.Fatalf("rabbitmq-server not installed (apt-get install rabbitmq-server): %v", err)
	}
	port, dist := freePort(t), freePort(t)
	dir, err := os.MkdirTemp("", "drover-rabbit-")
	if err != nil {
		t.Fatal(err)
	}
	n := &rabbitNode{name: fmt.Sprintf("drover-test-%d@localhost", port), url: fmt.Sprintf("amqp://guest:guest@127.0.0.1:%d/", port), dir: dir}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "enabled_plugins"), []byte("[].\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "rabbitmq.conf"), []byte(fmt.Sprintf("listeners.tcp.local = 127.0.0.1:%d\n", port)), 0o644))
	// The Debian package runs the node as the rabbitmq user.
	if u, err := user.Lookup("rabbitmq"); err == nil && os.Geteuid() == 0 {
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chown(p, uid, gid) })
	}
	cmd := exec.Command("rabbitmq-server")
	cmd.Env = append(os.Environ(),
		"RABBITMQ_NODENAME="+n.name,
		"RABBITMQ_NODE_PORT="+strconv.Itoa(port),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(dist),
		"RABBITMQ_CONFIG_FILE="+filepath.Join(dir, "rabbitmq"),
		"RABBITMQ_MNESIA_BASE="+filepath.Join(dir, "mnesia"),
		"RABBITMQ_LOG_BASE="+filepath.Join(dir, "log"),
		"RABBITMQ_PID_FILE="+filepath.Join(dir, "pid"),
		"RABBITMQ_ENABLED_PLUGINS_FILE="+filepath.Join(dir, "enabled_plugins"),
		"RABBITMQ_FEATURE_FLAGS_FILE="+filepath.Join(dir, "feature_flags"),
	)
	out, err := os.Create(filepath.Join(os.TempDir(), fmt.Sprintf("drover-rabbit-%d.out", port)))
	must(err)
	cmd.Stdout, cmd.Stderr = out, out
	must(cmd.Start())
	t.Cleanup(func() {
		n.ctl(t, "shutdown")
		cmd.Process.Kill()
		cmd.Wait()
		out.Close()
		os.RemoveAll(dir)
	})
	n.waitUp(t, port)
	return n
}

func (n *rabbitNode) waitUp(t *testing.T, port int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second); err == nil {
			c.Close()
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("private RabbitMQ node %s not up within 60s (see %s)", n.name, os.TempDir())
}

// ctl runs rabbitmqctl against the node, bounded.
func (n *rabbitNode) ctl(t *testing.T, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-q", "-n", n.name}, args...)...).CombinedOutput()
	if err != nil {
		t.Logf("rabbitmqctl %v: %v\n%s", args, err, out)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

package devstack

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/drover-crawl/drover/node"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/workflows"
)

// TemporalBinaryRel is where `make bin/temporal` installs the Temporal CLI,
// relative to the repository root.
const TemporalBinaryRel = "bin/temporal"

// ErrTemporalBinaryMissing means bin/temporal is not installed; the error
// that wraps it says how to install it. Tests skip on it.
var ErrTemporalBinaryMissing = errors.New("temporal CLI binary missing")

// Defaults of TemporalOptions.
const (
	DefaultTemporalIP           = "127.0.0.1"
	DefaultTemporalNamespace    = "default"
	DefaultTemporalStartTimeout = 60 * time.Second
	// temporalStopTimeout bounds the graceful stop; after it the server is killed.
	temporalStopTimeout = 15 * time.Second
)

// TemporalOptions configures StartTemporal. The zero value starts
// bin/temporal (found above the working directory) in memory on free ports
// of 127.0.0.1, with its Web UI.
type TemporalOptions struct {
	// BinaryPath is the temporal CLI to run; empty means bin/temporal in the
	// repository root found by walking up from the working directory.
	BinaryPath string
	// IP the frontend binds; empty means 127.0.0.1.
	IP string
	// Port of the frontend gRPC service; 0 means a free port chosen now.
	Port int
	// UIPort of the Web UI; 0 means a free port chosen now, -1 no UI.
	UIPort int
	// DBFilename keeps the server's state in this SQLite file (its directory
	// is created); empty keeps it in memory.
	DBFilename string
	// Namespace registered at start and used by Client; empty means "default".
	Namespace string
	// LogLevel of the server (debug, info, warn, error); empty means warn.
	LogLevel string
	// Output receives the server's stdout and stderr; nil discards them (the
	// last lines still go into a start-up error).
	Output io.Writer
	// Logger is the SDK client's logger; nil logs warnings and errors to stderr.
	Logger log.Logger
	// StartTimeout bounds each attempt at the start, including the first
	// successful dial; 0 means 60 s. A server that crashes while starting
	// is started again, at most three times in all.
	StartTimeout time.Duration
}

// Temporal is a running `temporal server start-dev` process.
type Temporal struct {
	server    *testsuite.DevServer
	addr      string
	uiURL     string
	namespace string
	pids      func() []int

	stopOnce sync.Once
	stopErr  error
}

// StartTemporal starts a Temporal dev server from the temporal CLI and
// returns once a client has connected to it. The server always registers the
// CampaignState (Keyword) and PagesFetched (Int) search attributes. A fixed
// port that is already taken fails at once with a *PortInUseError naming
// its owner; a server that crashes while starting is started again, a
// bounded number of times. Call Stop when done.
func StartTemporal(ctx context.Context, opts TemporalOptions) (*Temporal, error) {
	bin, err := temporalBinary(opts.BinaryPath)
	if err != nil {
		return nil, err
	}
	ip := cmp.Or(opts.IP, DefaultTemporalIP)
	ns := cmp.Or(opts.Namespace, DefaultTemporalNamespace)

	port := opts.Port
	if port == 0 {
		p, err := FreePort(ip)
		if err != nil {
			return nil, err
		}
		port = p
	} else if err := CheckPortFreeFor(net.JoinHostPort(ip, strconv.Itoa(port)), "TEMPORAL_ADDRESS"); err != nil {
		return nil, fmt.Errorf("temporal frontend: %w", err)
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))

	devOpts := testsuite.DevServerOptions{
		ExistingPath: bin,
		ClientOptions: &client.Options{
			HostPort:  addr,
			Namespace: ns,
			Logger:    cmp.Or(opts.Logger, quietLogger()),
		},
		DBFilename: opts.DBFilename,
		LogLevel:   cmp.Or(opts.LogLevel, "warn"),
		ExtraArgs: []string{
			"--search-attribute", workflows.SearchAttributeState + "=Keyword",
			"--search-attribute", workflows.SearchAttributePages + "=Int",
		},
	}
	uiURL, err := setUIPort(&devOpts, ip, opts.UIPort)
	if err != nil {
		return nil, err
	}
	if opts.DBFilename != "" {
		if err := os.MkdirAll(filepath.Dir(opts.DBFilename), 0o755); err != nil {
			return nil, fmt.Errorf("temporal db directory: %w", err)
		}
	}
	// Our processes are the ones running this binary on this port: the SDK
	// keeps the *exec.Cmd to itself, and leaks it when the start fails.
	portArg := strconv.Itoa(port)
	pids := func() []int {
		return findProcesses(func(args []string) bool {
			i := slices.Index(args, "--port")
			return args[0] == bin && i > 0 && i+1 < len(args) && args[i+1] == portArg
		})
	}

	for attempt := 1; ; attempt++ {
		server, crashed, err := startDevServer(ctx, devOpts, opts, addr, pids)
		if err == nil {
			return &Temporal{server: server, addr: addr, uiURL: uiURL, namespace: ns, pids: pids}, nil
		}
		if !crashed || attempt == temporalStartAttempts || ctx.Err() != nil {
			return nil, err
		}
	}
}

// temporalStartAttempts bounds the starts of a dev server that crashes
// while starting. Its internal services bind ports it chose a moment
// before, which another process on a busy machine can take first; a
// new start chooses new ones.
const temporalStartAttempts = 3

// startDevServer makes one attempt at starting the dev server of devOpts
// on addr. It gives up as soon as the server crashes (crashed is then
// true) rather than dial a dead process until the start timeout, and kills
// what the attempt left running when it fails.
func startDevServer(ctx context.Context, devOpts testsuite.DevServerOptions, opts TemporalOptions,
	addr string, pids func() []int) (server *testsuite.DevServer, crashed bool, err error) {
	out := newOutputWriter(opts.Output)
	devOpts.Stdout, devOpts.Stderr = out, out
	startCtx, cancel := context.WithTimeout(ctx, cmp.Or(opts.StartTimeout, DefaultTemporalStartTimeout))
	defer cancel()
	go func() {
		select {
		case <-out.crashed:
			cancel()
		case <-startCtx.Done():
		}
	}()
	server, err = testsuite.StartDevServer(startCtx, devOpts)
	if err == nil {
		return server, false, nil
	}
	for _, pid := range pids() {
		killAndReap(pid)
	}
	msg := fmt.Sprintf("starting temporal dev server on %s: %v", addr, err)
	if crashed = out.hasCrashed(); crashed {
		msg = fmt.Sprintf("starting temporal dev server on %s: it crashed", addr)
	}
	if text := out.String(); text != "" {
		msg += "; server output:\n" + text
	}
	return nil, crashed, errors.New(msg)
}

// temporalBinary is the absolute path of the temporal CLI to run: path,
// which must be executable, or bin/temporal of the repository when empty.
func temporalBinary(path string) (string, error) {
	bin := path
	if bin == "" {
		var err error
		if bin, err = TemporalBinary(); err != nil {
			return "", err
		}
	} else if err := checkExecutable(bin); err != nil {
		return "", err
	}
	if abs, err := filepath.Abs(bin); err == nil {
		bin = abs
	}
	return bin, nil
}

// setUIPort sets the Web UI of devOpts from TemporalOptions.UIPort (-1: no
// UI; 0: a free port) and returns its URL ("" without one).
func setUIPort(devOpts *testsuite.DevServerOptions, ip string, uiPort int) (string, error) {
	if uiPort < 0 {
		devOpts.EnableUI = false
		return "", nil
	}
	if uiPort == 0 {
		// The CLI's own default, frontend port + 1000, may be taken.
		p, err := FreePort(ip)
		if err != nil {
			return "", err
		}
		uiPort = p
	} else if err := CheckPortFree(net.JoinHostPort(ip, strconv.Itoa(uiPort))); err != nil {
		return "", fmt.Errorf("temporal web UI: %w", err)
	}
	devOpts.EnableUI = true
	devOpts.UIPort = strconv.Itoa(uiPort)
	return "http://" + net.JoinHostPort(ip, strconv.Itoa(uiPort)), nil
}

// Address is the frontend's host:port, for TEMPORAL_ADDRESS.
func (t *Temporal) Address() string { return t.addr }

// Namespace is the namespace Client uses.
func (t *Temporal) Namespace() string { return t.namespace }

// UIURL is the Web UI's URL, or "" when the server runs headless.
func (t *Temporal) UIURL() string { return t.uiURL }

// Client is a client connected to the server's namespace; Stop closes it.
func (t *Temporal) Client() client.Client { return t.server.Client() }

// Stop closes the client and stops the server, killing it if it has not
// exited within 15 s. Calling it again returns the first result.
func (t *Temporal) Stop() error {
	t.stopOnce.Do(func() {
		t.server.Client().Close()
		done := make(chan error, 1)
		go func() { done <- t.server.Stop() }()
		select {
		case err := <-done:
			t.stopErr = ignoreInterrupted(err)
		case <-time.After(temporalStopTimeout):
			for _, pid := range t.pids() {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
			}
			t.stopErr = fmt.Errorf("temporal dev server on %s did not stop within %s; killed", t.addr, temporalStopTimeout)
		}
	})
	return t.stopErr
}

// ignoreInterrupted treats "the server exited because we interrupted it" as
// a clean stop.
func ignoreInterrupted(err error) error {
	var ee interface{ Sys() any }
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGINT {
			return nil
		}
	}
	return err
}

// killAndReap kills a child process the SDK started and then forgot, and
// waits (bounded) for it so that it does not linger as a zombie.
func killAndReap(pid int) {
	if syscall.Kill(pid, syscall.SIGKILL) != nil {
		return
	}
	_ = await.Until(context.Background(), 5*time.Second, 20*time.Millisecond, func() error {
		if got, err := syscall.Wait4(pid, nil, syscall.WNOHANG, nil); got != pid && err == nil {
			return errors.New("not reaped")
		}
		return nil
	})
}

// TemporalBinary returns the path of bin/temporal in the repository root
// above the working directory, or an error wrapping
// ErrTemporalBinaryMissing that says how to install it.
func TemporalBinary() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding bin/temporal: %w", err)
	}
	return FindTemporalBinary(wd)
}

// FindTemporalBinary walks up from dir to the repository root (the first
// directory holding go.mod) and returns its bin/temporal.
func FindTemporalBinary(dir string) (string, error) {
	root, err := RepoRoot(dir)
	if err != nil {
		return "", err
	}
	bin := filepath.Join(root, TemporalBinaryRel)
	return bin, checkExecutable(bin)
}

// EnsureTemporalBinary returns nil when bin/temporal is installed in the
// repository root above the working directory, and otherwise an error
// (wrapping ErrTemporalBinaryMissing) that says to run `make bin/temporal`.
func EnsureTemporalBinary() error {
	_, err := TemporalBinary()
	return err
}

// RepoRoot returns the first directory at or above dir that holds go.mod.
func RepoRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod at or above %s: run this from the drover repository", dir)
		}
	}
}

func checkExecutable(bin string) error {
	fi, err := os.Stat(bin)
	if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%w: %s is not installed: run `make bin/temporal` in the repository root (builds the temporal CLI, about 3.5 minutes cold)",
			ErrTemporalBinaryMissing, bin)
	}
	return nil
}

// outputWriter forwards the dev server's output to w (if any) and keeps
// its first and last bytes for a start-up error: a Go panic's message
// comes first, before its stack. crashed is closed once the output shows
// the process died of a panic or a fatal runtime error.
type outputWriter struct {
	w       io.Writer
	crashed chan struct{}

	mu         sync.Mutex
	head, tail []byte
	written    int
	dead       bool
}

// outputKeep is how much of the start and of the end of the output an
// outputWriter keeps.
const outputKeep = 4 << 10

// crashMarks begin the lines a Go program writes as it dies: at the start
// of a line, so that a log line that only mentions a panic is not one.
var crashMarks = [][]byte{[]byte("\npanic: "), []byte("\nfatal error: ")}

func newOutputWriter(w io.Writer) *outputWriter {
	return &outputWriter{w: w, crashed: make(chan struct{})}
}

func (o *outputWriter) Write(p []byte) (int, error) {
	o.mu.Lock()
	o.written += len(p)
	rest := p
	if n := min(len(rest), outputKeep-len(o.head)); n > 0 {
		from := max(0, len(o.head)-16)
		o.head = append(o.head, rest[:n]...)
		o.noteCrash(o.head[from:], from == 0)
		rest = rest[n:]
	}
	if len(rest) > 0 {
		from := max(0, len(o.tail)-16)
		o.tail = append(o.tail, rest...)
		o.noteCrash(o.tail[from:], false)
		if len(o.tail) > outputKeep {
			o.tail = append(o.tail[:0], o.tail[len(o.tail)-outputKeep:]...)
		}
	}
	o.mu.Unlock()
	if o.w != nil {
		return o.w.Write(p)
	}
	return len(p), nil
}

// noteCrash closes o.crashed the first time b, the end of what o keeps
// (its very start when first), holds a crash mark. o.mu is held.
func (o *outputWriter) noteCrash(b []byte, first bool) {
	if o.dead {
		return
	}
	for _, m := range crashMarks {
		if bytes.Contains(b, m) || first && bytes.HasPrefix(b, m[1:]) {
			o.dead = true
			close(o.crashed)
			return
		}
	}
}

// hasCrashed says whether the output showed the process dying.
func (o *outputWriter) hasCrashed() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.dead
}

// String is the start of the output and its end, with "[...]" where
// bytes between them were dropped.
func (o *outputWriter) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	gap := ""
	if o.written > len(o.head)+len(o.tail) {
		gap = "\n[...]\n"
	}
	return string(o.head) + gap + string(o.tail)
}

func quietLogger() log.Logger {
	return log.NewStructuredLogger(slog.New(node.QuietCancels(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
}

package devstack

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds of the supervisor.
const (
	// restartMin and restartMax bound the wait before a restart; it doubles
	// with each crash in a row and starts again from restartMin once a run
	// lasted restartReset.
	restartMin   = time.Second
	restartMax   = 30 * time.Second
	restartReset = time.Minute
	// procStopTimeout is how long a child has to exit after its stop
	// signal before it is killed.
	procStopTimeout = 15 * time.Second
)

// ProcSpec is a child process the supervisor keeps running.
type ProcSpec struct {
	// Name names the child in messages and its log file (LogDir/NAME.log).
	Name string
	Path string
	Args []string
	// Env is added to the supervisor's environment.
	Env []string
	// StopSignal asks the child to exit; 0 means SIGTERM.
	StopSignal syscall.Signal
}

// Supervisor runs child processes, restarts each one that exits (with
// backoff, saying so on Out) and stops them all, in the reverse order of
// their start, on Stop. Each child runs in a process group of its own, so
// a Ctrl-C at the terminal reaches the supervisor only and it stops the
// children in order; a child gets SIGTERM if the supervisor dies.
type Supervisor struct {
	logDir string
	out    io.Writer

	mu       sync.Mutex
	children []*Child
	stopping bool
	stopped  chan struct{} // closed by Stop
}

// NewSupervisor returns a supervisor whose children log to logDir/NAME.log
// (appended to) and whose own messages (exited, restarting) go to out.
func NewSupervisor(logDir string, out io.Writer) *Supervisor {
	return &Supervisor{logDir: logDir, out: out, stopped: make(chan struct{})}
}

// Child is a supervised process.
type Child struct {
	spec ProcSpec
	sup  *Supervisor
	log  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	starts int
	exited chan struct{} // closed when the current run has exited
	done   chan struct{} // closed when supervision has ended
}

// Start starts spec's process and supervises it until Stop.
func (s *Supervisor) Start(spec ProcSpec) (*Child, error) {
	if err := os.MkdirAll(s.logDir, 0o755); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	c := &Child{spec: spec, sup: s, log: filepath.Join(s.logDir, spec.Name+".log"), done: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return nil, errStopping
	}
	if err := c.run(); err != nil {
		return nil, err
	}
	s.children = append(s.children, c)
	go c.supervise()
	return c, nil
}

func (s *Supervisor) printf(format string, args ...any) {
	if s.out != nil {
		fmt.Fprintf(s.out, "dev: "+format+"\n", args...)
	}
}

// Name is the child's name.
func (c *Child) Name() string { return c.spec.Name }

// LogPath is the child's log file.
func (c *Child) LogPath() string { return c.log }

// PID is the process ID of the current run, or 0 between runs.
func (c *Child) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	select {
	case <-c.exited:
		return 0
	default:
	}
	return c.cmd.Process.Pid
}

// Starts is how many times the child was started (1 + its restarts).
func (c *Child) Starts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}

// run starts one run of the child.
func (c *Child) run() error {
	f, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(c.spec.Path, c.spec.Args...)
	cmd.Env = append(os.Environ(), c.spec.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	// Pdeathsig: a supervisor killed with SIGKILL must not leave its stack
	// running. Go's runtime does not retire the threads that fork children
	// (no LockOSThread here), so the signal means the supervisor died.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	fmt.Fprintf(f, "=== %s %s start %s\n", time.Now().Format(time.RFC3339), c.spec.Path, strings.Join(c.spec.Args, " "))
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", c.spec.Name, err)
	}
	exited := make(chan struct{})
	c.mu.Lock()
	c.cmd, c.exited = cmd, exited
	c.starts++
	c.mu.Unlock()
	go func() {
		cmd.Wait()
		f.Close()
		close(exited)
	}()
	return nil
}

// supervise restarts the child whenever it exits, until the supervisor stops.
func (c *Child) supervise() {
	defer close(c.done)
	backoff := restartMin
	for {
		c.mu.Lock()
		cmd, exited := c.cmd, c.exited
		c.mu.Unlock()
		started := time.Now()
		<-exited
		if c.sup.isStopping() {
			return
		}
		ran := time.Since(started)
		if ran >= restartReset {
			backoff = restartMin
		}
		c.sup.printf("%s (pid %d) exited after %s: %v; restarting in %s; last lines of %s:\n%s",
			c.spec.Name, cmd.Process.Pid, ran.Round(100*time.Millisecond), exitReason(cmd), backoff, c.log, indent(lastLines(c.log, 5)))
		for {
			select {
			case <-c.sup.stopped:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, restartMax)
			err := c.sup.whileRunning(c.run)
			if errors.Is(err, errStopping) {
				return
			}
			if err != nil {
				c.sup.printf("%s: %v; trying again in %s", c.spec.Name, err, backoff)
				continue
			}
			break
		}
		c.sup.printf("%s restarted (pid %d)", c.spec.Name, c.PID())
	}
}

func exitReason(cmd *exec.Cmd) string {
	if ps := cmd.ProcessState; ps != nil {
		return ps.String()
	}
	return "unknown"
}

// stop signals the child and waits (bounded) for it to exit, then kills it.
func (c *Child) stop() {
	c.mu.Lock()
	cmd, exited := c.cmd, c.exited
	c.mu.Unlock()
	if cmd != nil {
		sig := c.spec.StopSignal
		if sig == 0 {
			sig = syscall.SIGTERM
		}
		_ = cmd.Process.Signal(sig)
		select {
		case <-exited:
		case <-time.After(procStopTimeout):
			c.sup.printf("%s did not stop within %s; killed", c.spec.Name, procStopTimeout)
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	<-c.done
}

// Stop stops supervising and stops every child, the last started first.
func (s *Supervisor) Stop() {
	s.mu.Lock()
	if !s.stopping {
		s.stopping = true
		close(s.stopped)
	}
	children := s.children
	s.mu.Unlock()
	for i := len(children) - 1; i >= 0; i-- {
		children[i].stop()
	}
}

func (s *Supervisor) isStopping() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopping
}

var errStopping = errors.New("supervisor stopping")

// whileRunning runs f unless the supervisor is stopping, and keeps Stop
// from starting meanwhile: a child started is a child Stop will stop.
func (s *Supervisor) whileRunning(f func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopping {
		return errStopping
	}
	return f()
}

// lastLines returns the last n lines of a file.
func lastLines(path string, n int) string {
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

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

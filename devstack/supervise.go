package devstack

import (
	"errors"
	"fmt"
	"io"
	"os"
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
	proc   *Proc // the current run
	starts int
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
	if c.proc == nil || !c.proc.Alive() {
		return 0
	}
	return c.proc.PID()
}

// Starts is how many times the child was started (1 + its restarts).
func (c *Child) Starts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.starts
}

// run starts one run of the child.
func (c *Child) run() error {
	// Pdeathsig: a supervisor killed with SIGKILL must not leave its stack
	// running. Go's runtime does not retire the threads that fork children
	// (no LockOSThread here), so the signal means the supervisor died.
	p, err := startProc(c.spec, "", c.log, &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM})
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.proc = p
	c.starts++
	c.mu.Unlock()
	return nil
}

// supervise restarts the child whenever it exits, until the supervisor stops.
func (c *Child) supervise() {
	defer close(c.done)
	backoff := restartMin
	for {
		c.mu.Lock()
		p := c.proc
		c.mu.Unlock()
		started := time.Now()
		<-p.Exited()
		if c.sup.isStopping() {
			return
		}
		ran := time.Since(started)
		if ran >= restartReset {
			backoff = restartMin
		}
		c.sup.printf("%s (pid %d) exited after %s: %v; restarting in %s; last lines of %s:\n%s",
			c.spec.Name, p.PID(), ran.Round(100*time.Millisecond), p.exitReason(), backoff, c.log, indent(Tail(c.log, 5)))
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

// stop signals the child and waits (bounded) for it to exit, then kills it.
func (c *Child) stop() {
	c.mu.Lock()
	p := c.proc
	c.mu.Unlock()
	if p != nil && !p.Stop(procStopTimeout) {
		c.sup.printf("%s did not stop within %s; killed", c.spec.Name, procStopTimeout)
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

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}

package devstack

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Proc is one run of a process started from a binary, its output appended
// to a log file: what the supervisor restarts, and what tests and the
// benchmarks start, stop and kill.
type Proc struct {
	spec   ProcSpec
	log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // valid once exited is closed
}

// StartProc starts spec's process in dir (its working directory; "" for
// this one) with its output appended to dir/NAME.log. It is SIGKILLed if
// this process dies, so a killed test or benchmark leaves nothing behind.
func StartProc(spec ProcSpec, dir string) (*Proc, error) {
	return startProc(spec, dir, filepath.Join(dir, spec.Name+".log"), &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL})
}

func startProc(spec ProcSpec, dir, log string, attr *syscall.SysProcAttr) (*Proc, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = attr
	fmt.Fprintf(f, "=== %s %s start %s\n", time.Now().Format(time.RFC3339Nano), spec.Path, strings.Join(spec.Args, " "))
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Proc{spec: spec, log: log, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Name is the process's name (its ProcSpec's).
func (p *Proc) Name() string { return p.spec.Name }

// LogPath is the process's log file.
func (p *Proc) LogPath() string { return p.log }

// PID is the process's ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive says whether the process still runs.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err is how the process ended (cmd.Wait's error); nil while it runs.
func (p *Proc) Err() error {
	if p.Alive() {
		return nil
	}
	return p.err
}

// exitReason says how the process ended ("exit status 1", "signal: killed").
func (p *Proc) exitReason() string {
	if ps := p.cmd.ProcessState; ps != nil && !p.Alive() {
		return ps.String()
	}
	return "unknown"
}

// Kill SIGKILLs the process, if it still runs, and waits for it.
func (p *Proc) Kill() {
	if p.Alive() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.exited
}

// Stop sends the process its stop signal (SIGTERM unless its ProcSpec
// says otherwise), waits for it at most timeout, and then kills it. It
// reports whether the process stopped by itself.
func (p *Proc) Stop(timeout time.Duration) bool {
	if !p.Alive() {
		return true
	}
	sig := p.spec.StopSignal
	if sig == 0 {
		sig = syscall.SIGTERM
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return true
	case <-time.After(timeout):
		p.Kill()
		return false
	}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string { return Tail(p.log, n) }

// Tail returns the last n lines of a file, or the error reading it.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	return LastLines(string(b), n)
}

// LastLines returns the last n lines of s.
func LastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Build builds main packages of the repository at root, named by their
// directory ("worker", "scheduler", "devstack/cmd/kafka"), into dir, each
// binary named after the last element; without -race: they are the
// processes under test, not the test.
func Build(ctx context.Context, root, dir string, names ...string) error {
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, name := range names {
		args = append(args, "./"+name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

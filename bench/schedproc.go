package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
)

// buildScheduler builds ./scheduler into a new temporary directory, which
// the caller removes.
func (o Options) buildScheduler(ctx context.Context, scenario string) (dir, bin string, err error) {
	dir, err = os.MkdirTemp("", "drover-bench-"+scenario+"-")
	if err != nil {
		return "", "", err
	}
	bin = filepath.Join(dir, "scheduler")
	fmt.Fprintf(o.Log, "bench: %s: building the scheduler ...\n", scenario)
	if err := goBuild(ctx, "./scheduler", bin); err != nil {
		os.RemoveAll(dir)
		return "", "", err
	}
	return dir, bin, nil
}

// schedProc is a scheduler binary run as a child process, its log in a
// file of dir.
type schedProc struct {
	cmd     *exec.Cmd
	addr    string
	logPath string
	exited  chan error
}

// startSchedProc starts bin listening on a free loopback port, with its
// seen-set in dir and its metrics on a port of its own choosing; extra
// flags follow.
func startSchedProc(bin, dir, amqpURL string, extra ...string) (*schedProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	p := &schedProc{addr: addr, logPath: filepath.Join(dir, "scheduler.log"), exited: make(chan error, 1)}
	logf, err := os.Create(p.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child holds its own descriptor
	args := append([]string{"-listen", addr, "-seen", filepath.Join(dir, "seen-scheduler"), "-metrics-addr", "127.0.0.1:0"}, extra...)
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), "AMQP_URL="+amqpURL, "DROVER_TOKEN=")
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.exited <- p.cmd.Wait() }()
	return p, nil
}

func (p *schedProc) pid() int { return p.cmd.Process.Pid }

// tail is the end of the scheduler's log, for an error message.
func (p *schedProc) tail() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// alive returns an error when the scheduler has exited.
func (p *schedProc) alive() error {
	select {
	case e := <-p.exited:
		p.exited <- e
		return fmt.Errorf("scheduler exited: %v\n%s", e, p.tail())
	default:
		return nil
	}
}

var metricsURLRe = regexp.MustCompile(`metrics=(http://\S+/metrics)`)

// metricsURL is where the scheduler serves its metrics, from its log line
// "scheduler listening" ("" until it is written).
func (p *schedProc) metricsURL() string {
	b, _ := os.ReadFile(p.logPath)
	if m := metricsURLRe.FindSubmatch(b); m != nil {
		return string(m[1])
	}
	return ""
}

// stop ends the scheduler: SIGTERM, then SIGKILL after 15 s.
func (p *schedProc) stop() {
	if p.alive() != nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// dialSession opens a fetcher session for cfg, retrying for 15 s while the
// scheduler starts.
func (p *schedProc) dialSession(ctx context.Context, cfg campaign.Config, client string, buffer int) (*session.Session, error) {
	for deadline := time.Now().Add(15 * time.Second); ; {
		sess, err := session.Client{Token: session.DevToken}.DialSession(ctx, p.addr, client, cfg, buffer)
		if err == nil {
			return sess, nil
		}
		if err := p.alive(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no session with the scheduler: %w\n%s", err, p.tail())
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

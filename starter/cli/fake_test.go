package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// fakeTemporal is Campaigns over a map: one campaign per ID, whose Describe
// answers walk through a script (the last one repeats).
type fakeTemporal struct {
	mu        sync.Mutex
	runs      map[string]*fakeRun
	started   []StartRequest
	signals   []sentSignal
	updates   []any
	updateErr error
	rules     campaign.Rules // the live rules, which the rules Update adds to
	// rulesAnswer, when set, is the rules Update's answer instead.
	rulesAnswer *workflows.RulesResult
	listQuery   string
}

type fakeRun struct {
	describes []Execution
	n         int
	status    workflows.Status // the status query's answer
	result    workflows.Status // the result of a completed run
}

type sentSignal struct {
	id, name string
	arg      any
}

func newFake() *fakeTemporal { return &fakeTemporal{runs: map[string]*fakeRun{}} }

func (f *fakeTemporal) add(id string, st workflows.Status, describes ...Execution) *fakeRun {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range describes {
		describes[i].ID = id
	}
	r := &fakeRun{describes: describes, status: st, result: st}
	f.runs[id] = r
	return r
}

func (f *fakeTemporal) Start(_ context.Context, req StartRequest) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.runs[req.ID]; ok && r.describes[min(r.n, len(r.describes)-1)].Status == StatusRunning {
		return "", fmt.Errorf("%w: workflow execution already started", ErrAlreadyStarted)
	}
	f.started = append(f.started, req)
	return "run-1", nil
}

func (f *fakeTemporal) Describe(_ context.Context, id string) (Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return Execution{}, fmt.Errorf("%w: workflow not found for ID: %s", ErrNotFound, id)
	}
	ex := r.describes[min(r.n, len(r.describes)-1)]
	r.n++
	return ex, nil
}

func (f *fakeTemporal) Query(_ context.Context, id, name string, result any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name != workflows.QueryStatus {
		return fmt.Errorf("unknown query %s", name)
	}
	*result.(*workflows.Status) = f.runs[id].status
	return nil
}

func (f *fakeTemporal) Result(_ context.Context, id string, result any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	*result.(*workflows.Status) = f.runs[id].result
	return nil
}

func (f *fakeTemporal) Signal(_ context.Context, id, name string, arg any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok || r.describes[min(r.n, len(r.describes)-1)].Status != StatusRunning {
		return fmt.Errorf("%w: workflow execution already completed", ErrNotFound)
	}
	f.signals = append(f.signals, sentSignal{id, name, arg})
	return nil
}

func (f *fakeTemporal) Update(_ context.Context, id, name string, arg, result any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return fmt.Errorf("%w: workflow not found", ErrNotFound)
	}
	if r.describes[min(r.n, len(r.describes)-1)].Status != StatusRunning {
		return fmt.Errorf("%w: workflow execution already completed", ErrNotFound)
	}
	if f.updateErr != nil {
		return f.updateErr
	}
	f.updates = append(f.updates, arg)
	if req, ok := arg.(workflows.RulesRequest); ok && name == workflows.UpdateRules {
		// As the workflow does: add to the live rules, answer with them.
		if req.Exclude != "" {
			f.rules = f.rules.WithExclude(req.Exclude)
		}
		if req.Include != "" {
			f.rules = f.rules.WithInclude(req.Include)
		}
		if req.Host != nil {
			f.rules = f.rules.WithHost(*req.Host)
		}
		*result.(*workflows.RulesResult) = workflows.RulesResult{Rules: f.rules}
		if f.rulesAnswer != nil {
			*result.(*workflows.RulesResult) = *f.rulesAnswer
		}
	}
	return nil
}

func (f *fakeTemporal) List(_ context.Context, query string) ([]Execution, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.listQuery = query
	var out []Execution
	for _, r := range f.runs {
		out = append(out, r.describes[len(r.describes)-1])
	}
	return out, nil
}

// clock is the tests' fixed time.
var clock = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// refusedStats is the scheduler stats of a test without a scheduler.
func refusedStats(context.Context, []string, string, string) (session.Stats, error) {
	return session.Stats{}, errors.New("dial tcp 127.0.0.1:7420: connect: connection refused")
}

// dialTo is an App's Dial that gives c.
func dialTo(c Campaigns) func(context.Context, Env) (Campaigns, error) {
	return func(context.Context, Env) (Campaigns, error) { return c, nil }
}

// run runs the starter on args against c and the given scheduler stats
// (nil: no scheduler answers), at the tests' clock, and returns its exit
// code, stdout and stderr.
func run(t *testing.T, c Campaigns, stats StatsFunc, args ...string) (int, string, string) {
	t.Helper()
	if stats == nil {
		stats = refusedStats
	}
	return runApp(t, &App{Dial: dialTo(c), Stats: stats, Now: func() time.Time { return clock }}, args...)
}

// appWait bounds one run of the starter in these tests.
const appWait = 30 * time.Second

// runApp runs app on args, polling every millisecond, with its output
// collected, and returns its exit code, stdout and stderr.
func runApp(t *testing.T, app *App, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	app.Out, app.Err, app.Interval = &out, &errb, time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), appWait)
	defer cancel()
	code := app.Run(ctx, args)
	return code, out.String(), errb.String()
}

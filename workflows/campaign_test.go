package workflows

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/drover-crawl/drover/campaign"
)

// harness runs Campaign in the testsuite on virtual time with mocked
// activities: FetchSession runs until cancelled (24 h), Monitor reports
// every minute what the test set, Close and Notify are recorded.
type harness struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment

	drained atomic.Bool
	capped  atomic.Bool // Monitor's CapReached
	fetched atomic.Int64
	failed  atomic.Int64 // failures beyond the 1 every report has
	// unread: Monitor read no stats in its window (no scheduler answered).
	unread atomic.Bool

	mu       sync.Mutex
	starts   map[int]int // FetchSession starts per fetcher index
	seeds    int
	closes   []CloseInput
	closedAt time.Time // virtual time of the last Close
	notified []string  // events
	// keys are the started sessions' keys as the activity computes them
	// (from its info); ends are EndSessions' inputs.
	keys []string
	ends []EndSessionsInput
	// live are the live rules each FetchSession started with, in order.
	live []campaign.Rules
	// frontiers are the frontier keys Seed, FetchSession and Monitor were
	// given (campaign.Config.FrontierKey), each once.
	frontiers map[string]bool
	// calls counts the Close, EndSessions and Notify calls whose start the
	// listener saw and that have not returned. The workflow does not wait
	// for every one (the EndSessions of a stop): one may still be running,
	// and writing h, when ExecuteWorkflow returns.
	calls sync.WaitGroup
}

// newHarness builds the harness; before, when set, registers FetchSession
// expectations that win over the default one (testify takes the first
// expectation that matches).
func newHarness(t *testing.T, before func(env *testsuite.TestWorkflowEnvironment)) *harness {
	var s testsuite.WorkflowTestSuite
	h := &harness{t: t, env: s.NewTestWorkflowEnvironment(), starts: map[int]int{}, frontiers: map[string]bool{}}
	env := h.env
	env.RegisterWorkflowWithOptions(Campaign, workflow.RegisterOptions{Name: WorkflowName})
	env.RegisterActivity(&stubActivities{})
	env.SetOnActivityStartedListener(func(info *activity.Info, _ context.Context, args converter.EncodedValues) {
		h.mu.Lock()
		defer h.mu.Unlock()
		switch info.ActivityType.Name {
		case "FetchSession":
			var in FetchSessionInput
			require.NoError(t, args.Get(&in))
			h.starts[in.Index]++
			h.keys = append(h.keys, SessionKey(info.WorkflowExecution.RunID, info.ActivityID))
			h.live = append(h.live, in.Config.Live)
			h.frontiers[in.Config.FrontierKey()] = true
		case "Seed":
			var in SeedInput
			require.NoError(t, args.Get(&in))
			h.seeds++
			h.frontiers[in.Config.FrontierKey()] = true
		case "Monitor":
			var in MonitorInput
			require.NoError(t, args.Get(&in))
			h.frontiers[in.Config.FrontierKey()] = true
		case "Close", "EndSessions", "Notify":
			h.calls.Add(1) // their mocks below call Done
		}
	})
	// Whatever ran the workflow, no call of it outlives the test (a call
	// writing h while the next test runs is a race of that test's).
	t.Cleanup(h.settle)
	if before != nil {
		before(env)
	}
	env.OnActivity(acts.FetchSession, mock.Anything, mock.Anything).After(24*time.Hour).
		Return(SessionCounters{}, nil).Maybe()
	env.OnActivity(acts.Seed, mock.Anything, mock.Anything).Return(SeedResult{Seeded: 1}, nil).Maybe()
	env.OnActivity(acts.Monitor, mock.Anything, mock.Anything).After(time.Minute).Return(
		func(context.Context, MonitorInput) (MonitorResult, error) {
			if h.unread.Load() {
				return MonitorResult{Unread: true}, nil
			}
			n := h.fetched.Load()
			return MonitorResult{
				ReadAt:     h.env.Now(),
				Drained:    h.drained.Load(),
				CapReached: h.capped.Load(),
				Stats:      Counts{Fetched: n, Failed: 1 + h.failed.Load(), Queued: 7, InFlight: 3},
			}, nil
		}).Maybe()
	env.OnActivity(acts.Close, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in CloseInput) (CloseResult, error) {
			defer h.calls.Done()
			h.mu.Lock()
			defer h.mu.Unlock()
			h.closes = append(h.closes, in)
			h.closedAt = h.env.Now()
			return CloseResult{Stats: Counts{Fetched: h.fetched.Load(), Failed: 1}}, nil
		}).Maybe()
	env.OnActivity(acts.EndSessions, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in EndSessionsInput) (EndSessionsResult, error) {
			defer h.calls.Done()
			h.mu.Lock()
			defer h.mu.Unlock()
			h.ends = append(h.ends, in)
			return EndSessionsResult{Ended: len(in.Keys)}, nil
		}).Maybe()
	env.OnActivity(acts.Notify, mock.Anything, mock.Anything).Return(
		func(_ context.Context, in NotifyInput) error {
			defer h.calls.Done()
			h.mu.Lock()
			defer h.mu.Unlock()
			h.notified = append(h.notified, in.Event)
			return nil
		}).Maybe()
	return h
}

// withRun is cfg as the workflow that ended in st ran it: with the run it
// named (its frontier key is st.Frontier, ID~RUN).
func withRun(t *testing.T, cfg campaign.Config, st Status) campaign.Config {
	t.Helper()
	id, run, ok := strings.Cut(st.Frontier, campaign.RunSep)
	require.True(t, ok && id == cfg.ID && run != "", "frontier key %q is not %s~RUN", st.Frontier, cfg.ID)
	cfg.Run = run
	return cfg
}

func testConfig() campaign.Config {
	return campaign.Config{
		ID:       "c1",
		Seeds:    []string{"http://127.10.0.1:8080/"},
		Fetchers: 2,
		Sinks:    []string{"warc:/tmp/drover-test"},
	}
}

// at runs f at virtual time d after the start.
func (h *harness) at(d time.Duration, f func()) { h.env.RegisterDelayedCallback(f, d) }

func (h *harness) signal(name string, arg any) { h.env.SignalWorkflow(name, arg) }

// snapshot queries the status at virtual time d into *dst.
func (h *harness) snapshot(d time.Duration, dst *Status) {
	h.at(d, func() {
		v, err := h.env.QueryWorkflow(QueryStatus)
		require.NoError(h.t, err)
		require.NoError(h.t, v.Get(dst))
	})
}

// scale sends the scale update at virtual time d; the result or the
// rejection lands in res / rejected. The callbacks run on the workflow's
// update coroutine, not on the test's goroutine: they report with assert
// (FailNow would end that coroutine, not the test).
func (h *harness) scale(d time.Duration, n int, res *ScaleResult, rejected *error) {
	h.at(d, func() {
		h.env.UpdateWorkflow(UpdateScale, "", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { *rejected = err },
			OnComplete: func(v any, err error) {
				if !assert.NoError(h.t, err, "scale to %d completed with an error", n) {
					return
				}
				switch v := v.(type) {
				case ScaleResult:
					*res = v
				case converter.EncodedValue:
					assert.NoError(h.t, v.Get(res), "scale to %d: result", n)
				}
			},
		}, ScaleRequest{Fetchers: n})
	})
}

// settle waits until every Close, EndSessions and Notify call started has
// returned (h.calls).
func (h *harness) settle() {
	h.t.Helper()
	done := make(chan struct{})
	go func() { h.calls.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		require.FailNow(h.t, "a Close, EndSessions or Notify call still running 10 s after the workflow ended")
	}
}

// run runs the workflow to its end and returns its result once every
// activity call that started has returned: the test then reads h alone.
func (h *harness) run(in CampaignInput) Status {
	h.env.ExecuteWorkflow(WorkflowName, in)
	h.settle()
	require.True(h.t, h.env.IsWorkflowCompleted())
	require.NoError(h.t, h.env.GetWorkflowError())
	var st Status
	require.NoError(h.t, h.env.GetWorkflowResult(&st))
	return st
}

func (h *harness) startsOf(i int) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.starts[i]
}

// runToEnd runs a campaign of cfg in which Monitor counts 42 pages
// fetched at 2 minutes and reports end at 5; mid is its status at 4
// minutes, st the final one.
func (h *harness) runToEnd(cfg campaign.Config, end *atomic.Bool) (mid, st Status) {
	h.at(2*time.Minute, func() { h.fetched.Store(42) })
	h.snapshot(4*time.Minute, &mid)
	h.at(5*time.Minute, func() { end.Store(true) })
	st = h.run(CampaignInput{Config: cfg})
	return mid, st
}

// A Monitor that read nothing (no scheduler answered in its window) is no
// reading of zero: the status keeps the last counts, and when they were
// read, instead of showing 0 fetched.
func TestUnreadMonitorKeepsLastCounts(t *testing.T) {
	h := newHarness(t, nil)
	var start time.Time
	var before, during, after Status
	h.at(time.Second, func() { start = h.env.Now() })
	h.at(150*time.Second, func() { h.fetched.Store(42) })
	h.snapshot(190*time.Second, &before)
	h.at(210*time.Second, func() { h.unread.Store(true) })
	h.snapshot(330*time.Second, &during)
	h.at(350*time.Second, func() { h.unread.Store(false); h.fetched.Store(50) })
	h.snapshot(370*time.Second, &after)
	h.at(390*time.Second, func() { h.drained.Store(true) })
	st := h.run(CampaignInput{Config: testConfig()})

	readAt := start.Add(179 * time.Second) // the reading at 3 minutes
	require.Equal(t, int64(42), before.PagesFetched)
	require.True(t, before.CountsAt.Equal(readAt), "counts at %s, want %s", before.CountsAt, readAt)
	require.Equal(t, int64(42), during.PagesFetched, "two unread Monitors later")
	require.Equal(t, int64(7), during.URLsQueued)
	require.True(t, during.CountsAt.Equal(readAt), "counts at %s, want the last reading's %s", during.CountsAt, readAt)
	require.Equal(t, int64(50), after.PagesFetched)
	require.True(t, after.CountsAt.After(readAt))
	require.Equal(t, campaign.StateCompleted, st.State)
}

func TestCompletesWhenDrained(t *testing.T) {
	h := newHarness(t, nil)
	cfg := testConfig()
	cfg.NotifyURL = "http://127.0.0.1:9/hook"
	mid, st := h.runToEnd(cfg, &h.drained)

	require.Equal(t, campaign.StateRunning, mid.State)
	require.Equal(t, 2, mid.FetchersDesired)
	require.Equal(t, 2, mid.FetchersActive)
	require.Equal(t, int64(42), mid.PagesFetched)
	require.Equal(t, int64(7), mid.URLsQueued)
	require.Len(t, mid.Fetchers, 2)
	require.True(t, mid.Fetchers[0].Running && mid.Fetchers[1].Running)

	require.Equal(t, campaign.StateCompleted, st.State)
	require.Equal(t, "frontier drained", st.Reason)
	require.Equal(t, 0, st.FetchersActive)
	require.Equal(t, int64(42), st.PagesFetched)
	require.Equal(t, []CloseInput{{Config: withRun(t, cfg.WithDefaults(), st), Delete: true}}, h.closes)
	require.Equal(t, []string{"completed"}, h.notified)
	require.Equal(t, 1, h.seeds)
	require.Equal(t, 1, h.startsOf(0))
	require.Equal(t, 1, h.startsOf(1))
}

func TestPauseResumeStop(t *testing.T) {
	h := newHarness(t, nil)
	var paused, pausedDrained, resumed Status
	h.at(5*time.Minute, func() { h.signal(SignalPause, PauseSignal{Reason: "maintenance"}) })
	h.snapshot(6*time.Minute, &paused)
	// Drained while paused must not end the campaign.
	h.at(6*time.Minute+time.Second, func() { h.drained.Store(true) })
	h.snapshot(9*time.Minute, &pausedDrained)
	h.at(9*time.Minute+time.Second, func() { h.drained.Store(false) })
	h.at(10*time.Minute, func() { h.signal(SignalResume, nil) })
	h.snapshot(11*time.Minute, &resumed)
	h.at(15*time.Minute, func() { h.signal(SignalStop, StopSignal{Reason: "enough"}) })

	st := h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, campaign.StatePaused, paused.State)
	require.Equal(t, "maintenance", paused.Reason)
	require.Equal(t, 0, paused.FetchersActive)
	require.Equal(t, 2, paused.FetchersDesired)
	require.Equal(t, campaign.StatePaused, pausedDrained.State)
	require.Equal(t, campaign.StateRunning, resumed.State)
	require.Equal(t, 2, resumed.FetchersActive)
	require.Equal(t, campaign.StateStopped, st.State)
	require.Equal(t, "enough", st.Reason)
	require.Len(t, h.closes, 1)
	require.True(t, h.closes[0].Delete)
	require.Equal(t, 2, h.startsOf(0))
	require.Equal(t, 2, h.startsOf(1))
	require.Equal(t, 0, st.Restarts, "pause and resume are not restarts")
	// The pause ended the running sessions through the schedulers, under
	// the keys the activities computed from their info. (The stop's
	// EndSessions is scheduled too; the workflow does not wait for it, so
	// h.ends may or may not hold it.)
	require.Len(t, h.keys, 4)
	sort.Strings(h.keys)
	require.NotEmpty(t, h.ends)
	sort.Strings(h.ends[0].Keys)
	require.Equal(t, EndSessionsInput{Campaign: st.Frontier, Keys: []string{h.keys[0], h.keys[2]}}, h.ends[0]) // fetcher-0-1, fetcher-1-1
}

// Several control signals in one workflow task reach the workflow with
// their relative order lost (see TestSDKDoesNotKeepOrderAcrossSignalChannels);
// the batch rule makes pause win, so pause, resume, pause ends paused.
//
// A batch is the signals the testsuite delivers before its next workflow
// task, and any activity completing in between starts one. So the batches
// are sent half a minute off the Monitor's minute (its mock returns on the
// minute): the testsuite moves its clock to a timer only when no activity
// is running, and no activity is due at the half minute. On the minute,
// the Monitor's timer fires with the test's, in an order the mock clock
// does not fix, and its completion could split a batch (pause; resume,
// pause), which ends paused as well and so hides a broken rule. The
// session numbers checked at the end show that no batch was split.
func TestSignalsInOneTaskPauseWins(t *testing.T) {
	h := newHarness(t, nil)
	const half = 30 * time.Second
	var afterPRP, afterRP, afterResume Status
	h.at(5*time.Minute+half, func() {
		h.env.SignalWorkflowSkippingWorkflowTask(SignalPause, nil)
		h.env.SignalWorkflowSkippingWorkflowTask(SignalResume, nil)
		h.signal(SignalPause, nil)
	})
	h.snapshot(6*time.Minute+half, &afterPRP)
	h.at(7*time.Minute+half, func() {
		h.env.SignalWorkflowSkippingWorkflowTask(SignalResume, nil)
		h.signal(SignalPause, nil)
	})
	h.snapshot(8*time.Minute+half, &afterRP)
	h.at(9*time.Minute+half, func() { h.signal(SignalResume, nil) })
	h.snapshot(10*time.Minute+half, &afterResume)
	h.at(11*time.Minute+half, func() {
		// stop wins over everything in its batch
		h.env.SignalWorkflowSkippingWorkflowTask(SignalStop, nil)
		h.signal(SignalResume, nil)
	})

	st := h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, campaign.StatePaused, afterPRP.State)
	require.Equal(t, 0, afterPRP.FetchersActive)
	require.Equal(t, campaign.StatePaused, afterRP.State)
	require.Equal(t, campaign.StateRunning, afterResume.State)
	require.Equal(t, 2, afterResume.FetchersActive)
	require.Equal(t, campaign.StateStopped, st.State)
	// The lone resume started each fetcher's second session: no resume of
	// a batch was applied alone (it would have started sessions, cancelled
	// by the pause after it before they ran, and used up their numbers).
	var ids []string
	for _, k := range h.keys {
		_, id, _ := strings.Cut(k, "/")
		ids = append(ids, id)
	}
	sort.Strings(ids)
	require.Equal(t, []string{fetchActivityID(0, 1), fetchActivityID(0, 2), fetchActivityID(1, 1), fetchActivityID(1, 2)}, ids)
}

// TestSignalsInOneTaskBySeq: pause and resume stamped by the starter keep
// their order within one task; the latest wins.
func TestSignalsInOneTaskBySeq(t *testing.T) {
	h := newHarness(t, nil)
	var afterPR, afterRP Status
	h.at(5*time.Minute, func() {
		h.env.SignalWorkflowSkippingWorkflowTask(SignalPause, PauseSignal{Seq: 1})
		h.signal(SignalResume, ResumeSignal{Seq: 2})
	})
	h.snapshot(6*time.Minute, &afterPR)
	h.at(7*time.Minute, func() {
		h.env.SignalWorkflowSkippingWorkflowTask(SignalResume, ResumeSignal{Seq: 3})
		h.env.SignalWorkflowSkippingWorkflowTask(SignalPause, PauseSignal{Seq: 4})
		h.signal(SignalResume, nil) // unsequenced: pause wins the batch
	})
	h.snapshot(8*time.Minute, &afterRP)
	h.at(9*time.Minute, func() { h.signal(SignalStop, nil) })

	h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, campaign.StateRunning, afterPR.State, "pause then resume, sequenced: running")
	require.Equal(t, 2, afterPR.FetchersActive)
	require.Equal(t, campaign.StatePaused, afterRP.State, "an unsequenced resume in the batch: pause wins")
}

func TestScale(t *testing.T) {
	h := newHarness(t, nil)
	var up, down ScaleResult
	var upErr, downErr, negErr, hugeErr error
	var at5, at1 Status
	h.scale(5*time.Minute, 5, &up, &upErr)
	h.snapshot(6*time.Minute, &at5)
	h.scale(7*time.Minute, 1, &down, &downErr)
	h.snapshot(8*time.Minute, &at1)
	h.scale(8*time.Minute+time.Second, -1, new(ScaleResult), &negErr)
	h.scale(8*time.Minute+2*time.Second, 100000, new(ScaleResult), &hugeErr)
	h.at(9*time.Minute, func() { h.signal(SignalStop, nil) })

	st := h.run(CampaignInput{Config: testConfig()})

	require.NoError(t, upErr)
	require.NoError(t, downErr)
	require.Equal(t, ScaleResult{Previous: 2, Fetchers: 5}, up)
	require.Equal(t, ScaleResult{Previous: 5, Fetchers: 1}, down)
	require.Equal(t, 5, at5.FetchersActive)
	require.Equal(t, 1, at1.FetchersActive)
	require.Equal(t, 1, at1.FetchersDesired)
	require.True(t, at1.Fetchers[0].Running)
	for _, f := range at1.Fetchers[1:] {
		require.False(t, f.Running, "fetcher %d", f.Index)
	}
	require.ErrorContains(t, negErr, "fetchers -1: must be between 0 and 1024")
	require.ErrorContains(t, hugeErr, "fetchers 100000: must be between 0 and 1024")
	require.Equal(t, 1, st.FetchersDesired)
	require.Equal(t, 0, st.Restarts)
	for i := range 5 {
		require.Equal(t, 1, h.startsOf(i), "fetcher %d", i)
	}
}

func failOnce(index int) func(env *testsuite.TestWorkflowEnvironment) {
	return func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.FetchSession, mock.Anything, mock.MatchedBy(func(in FetchSessionInput) bool {
			return in.Index == index
		})).Return(SessionCounters{}, errors.New("session lost")).Once()
	}
}

func TestRestartsFailedSession(t *testing.T) {
	h := newHarness(t, failOnce(0))
	var mid Status
	h.snapshot(3*time.Minute, &mid)
	h.at(4*time.Minute, func() { h.signal(SignalStop, nil) })

	st := h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, 1, mid.Restarts)
	require.Equal(t, 1, mid.Fetchers[0].Restarts)
	require.Equal(t, "session lost", mid.Fetchers[0].LastError)
	require.True(t, mid.Fetchers[0].Running)
	require.Equal(t, 2, mid.FetchersActive)
	require.Equal(t, 0, mid.Fetchers[1].Restarts)
	require.Empty(t, mid.Alert)
	require.Equal(t, 2, h.startsOf(0))
	require.Equal(t, 1, h.startsOf(1))
	require.Equal(t, campaign.StateStopped, st.State)
}

func TestRestartSignal(t *testing.T) {
	h := newHarness(t, nil)
	var mid Status
	h.at(5*time.Minute, func() {
		h.env.SignalWorkflowSkippingWorkflowTask(SignalRestart, RestartSignal{Fetcher: 7}) // no such fetcher: ignored
		h.signal(SignalRestart, RestartSignal{Fetcher: 1})
	})
	h.snapshot(6*time.Minute, &mid)
	h.at(7*time.Minute, func() { h.signal(SignalStop, nil) })

	h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, 1, mid.Restarts)
	require.Equal(t, 1, mid.Fetchers[1].Restarts)
	require.Equal(t, 0, mid.Fetchers[0].Restarts)
	require.Equal(t, 2, mid.FetchersActive)
	require.Equal(t, 1, h.startsOf(0))
	require.Equal(t, 2, h.startsOf(1))
}

func TestRestartAlert(t *testing.T) {
	h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.FetchSession, mock.Anything, mock.MatchedBy(func(in FetchSessionInput) bool {
			return in.Index == 0
		})).Return(SessionCounters{}, errors.New("scheduler unreachable"))
	})
	cfg := testConfig()
	cfg.RestartAlert = 2
	cfg.NotifyURL = "http://127.0.0.1:9/hook"
	var mid Status
	h.snapshot(10*time.Minute, &mid)
	h.at(11*time.Minute, func() { h.signal(SignalStop, nil) })

	st := h.run(CampaignInput{Config: cfg})

	require.Greater(t, mid.Restarts, 2)
	require.Contains(t, mid.Alert, "fetcher restarts in the last hour (alert above 2)")
	require.Equal(t, []string{"fetcher_restarts", "stopped"}, h.notified, "one alert an hour, then the end")
	require.Equal(t, campaign.StateStopped, st.State)
}

// An error-rate spike between two Monitor reports raises one exception
// notification an hour; a few failures among many pages do not.
func TestErrorRateAlert(t *testing.T) {
	h := newHarness(t, nil)
	cfg := testConfig()
	cfg.NotifyURL = "http://127.0.0.1:9/hook"
	var quiet, spiked Status
	h.at(2*time.Minute+30*time.Second, func() { h.fetched.Store(1000); h.failed.Store(10) })
	h.snapshot(4*time.Minute, &quiet)
	h.at(4*time.Minute+30*time.Second, func() { h.fetched.Store(1010); h.failed.Store(100) })
	h.snapshot(6*time.Minute, &spiked)
	h.at(6*time.Minute+30*time.Second, func() { h.failed.Store(300) }) // within the hour: no second alert
	h.at(9*time.Minute, func() { h.signal(SignalStop, nil) })

	h.run(CampaignInput{Config: cfg})

	require.Empty(t, quiet.Alert, "10 failures among 1,000 pages are no spike")
	require.Contains(t, spiked.Alert, "error-rate spike: 90 of the last 100 outcomes failed")
	require.Equal(t, []string{"error_rate", "stopped"}, h.notified)
}

// Cancel in the Web UI ends the campaign like stop: the fleet stops, Close
// runs, the result says stopped.
func TestCancelEndsLikeStop(t *testing.T) {
	h := newHarness(t, nil)
	h.at(5*time.Minute, func() { h.env.CancelWorkflow() })

	st := h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, campaign.StateStopped, st.State)
	require.Equal(t, "cancelled", st.Reason)
	require.Equal(t, 0, st.FetchersActive)
	require.Len(t, h.closes, 1)
	require.True(t, h.closes[0].Delete)
}

func TestSeedFailureFailsCampaign(t *testing.T) {
	h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.Seed, mock.Anything, mock.Anything).Return(SeedResult{}, errors.New("no scheduler"))
	})
	h.env.ExecuteWorkflow(WorkflowName, CampaignInput{Config: testConfig()})
	require.True(t, h.env.IsWorkflowCompleted())
	require.ErrorContains(t, h.env.GetWorkflowError(), "seeding failed")
	require.Len(t, h.closes, 1)
	require.False(t, h.closes[0].Delete, "a failed campaign keeps its queues")
	require.Equal(t, 0, h.startsOf(0))
}

func TestContinueAsNewCarriesState(t *testing.T) {
	h := newHarness(t, failOnce(0))
	h.at(2*time.Minute, func() { h.fetched.Store(42) })
	h.at(3*time.Minute, func() { h.signal(SignalRestart, RestartSignal{Fetcher: 1}) })
	h.at(5*time.Minute, func() {
		// Signals in the very task that crosses the threshold.
		h.env.SetCurrentHistoryLength(150)
		h.env.SignalWorkflowSkippingWorkflowTask(SignalRestart, RestartSignal{Fetcher: 0})
		h.signal(SignalPause, PauseSignal{Reason: "night"})
	})
	h.env.ExecuteWorkflow(WorkflowName, CampaignInput{Config: testConfig(), HistoryLimit: 100})

	require.True(t, h.env.IsWorkflowCompleted())
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, h.env.GetWorkflowError(), &can)
	require.Equal(t, WorkflowName, can.WorkflowType.Name)
	var next CampaignInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	s := next.State
	require.NotNil(t, s)
	require.Equal(t, 100, next.HistoryLimit)
	require.Equal(t, "c1", next.Config.ID)
	require.Equal(t, campaign.StatePaused, s.State)
	require.Equal(t, "night", s.Reason)
	require.True(t, s.Seeded)
	require.Equal(t, 1, s.Run)
	require.Equal(t, 2, s.FetchersDesired)
	require.Equal(t, 2, s.Restarts, "one failure, one restart signal")
	require.Equal(t, 1, s.Fetchers[0].Restarts)
	require.Equal(t, 1, s.Fetchers[1].Restarts)
	require.Equal(t, int64(42), s.PagesFetched)
	require.Empty(t, h.closes, "continue-as-new does not close the campaign")

	// The next run: no second seeding, still paused, the fleet comes back
	// on resume.
	h2 := newHarness(t, nil)
	var first, resumed Status
	h2.snapshot(30*time.Second, &first)
	h2.at(time.Minute+30*time.Second, func() { h2.signal(SignalResume, nil) })
	h2.snapshot(2*time.Minute, &resumed)
	h2.at(3*time.Minute, func() { h2.signal(SignalStop, nil) })
	st := h2.run(next)

	require.Equal(t, 0, h2.seeds)
	require.Equal(t, campaign.StatePaused, first.State)
	require.Equal(t, 1, first.Run)
	require.Equal(t, 0, first.FetchersActive)
	require.Equal(t, int64(42), first.PagesFetched)
	require.Equal(t, campaign.StateRunning, resumed.State)
	require.Equal(t, 2, resumed.FetchersActive)
	require.Equal(t, 2, st.Restarts)
	require.Equal(t, campaign.StateStopped, st.State)
}

// The histories must be recorded from integration runs against a dev
// server (DROVER_RECORD_HISTORY=1 go test ./systest/ -run 'TestPauseWithTemporalCLI|TestMissingKafkaTopicFailsCampaign'):
// campaign_history.json is a campaign paused, resumed and completed;
// failed_campaign_history.json one whose fetchers all failed until
// fail_after; campaign_history_before_end_sessions.json the first one as
// recorded before the workflow ended sessions through the schedulers
// (versionEndSessions: it replays without EndSessions);
// campaign_history_include_before_pushed_rules.json a campaign given a
// live include, recorded by TestSeedListsIncludeAndSeedOverHTTP before
// the schedulers pushed includes (it replays with the sessions' restart
// that followed). Replaying them
// catches a change to Campaign that would break running campaigns
// (non-determinism).
func TestReplayRecordedHistory(t *testing.T) {
	for _, name := range []string{"campaign_history.json", "failed_campaign_history.json", "campaign_history_before_end_sessions.json", "campaign_history_include_before_pushed_rules.json"} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join("testdata", name)
			if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
				t.Skipf("no recorded history at workflows/testdata/%s; record one from an integration run (see the comment above)", name)
			}
			r := worker.NewWorkflowReplayer()
			r.RegisterWorkflowWithOptions(Campaign, workflow.RegisterOptions{Name: WorkflowName})
			require.NoError(t, r.ReplayWorkflowHistoryFromJSONFile(nil, path))
		})
	}
}

func TestPauseWhileSeedingStartsNoFetcher(t *testing.T) {
	h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.Seed, mock.Anything, mock.Anything).After(time.Minute).Return(SeedResult{Seeded: 1}, nil)
	})
	var mid Status
	h.at(30*time.Second, func() { h.signal(SignalPause, nil) })
	h.snapshot(3*time.Minute, &mid)
	h.at(4*time.Minute, func() { h.signal(SignalStop, nil) })

	st := h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, campaign.StatePaused, mid.State)
	require.Equal(t, 0, h.startsOf(0)+h.startsOf(1))
	require.Equal(t, campaign.StateStopped, st.State)
}

// TestMaxPagesCompletes: when Monitor reports the cap reached, the campaign
// completes with its reason, stops its fleet and closes (deleting its
// queues), while the frontier still holds URLs; before that it runs.
func TestMaxPagesCompletes(t *testing.T) {
	h := newHarness(t, nil)
	cfg := testConfig()
	cfg.MaxPages = 43
	cfg.NotifyURL = "http://127.0.0.1:9/hook"
	mid, st := h.runToEnd(cfg, &h.capped)

	require.Equal(t, campaign.StateRunning, mid.State, "capped before Monitor said so")
	require.Equal(t, campaign.StateCompleted, st.State)
	require.Equal(t, "max pages reached", st.Reason)
	require.Equal(t, 0, st.FetchersActive)
	require.Equal(t, []CloseInput{{Config: withRun(t, cfg.WithDefaults(), st), Delete: true}}, h.closes)
	require.Equal(t, []string{"completed"}, h.notified)
}

func TestMaxDurationCompletes(t *testing.T) {
	h := newHarness(t, nil)
	cfg := testConfig()
	cfg.MaxDuration = 10 * time.Minute

	st := h.run(CampaignInput{Config: cfg})

	require.Equal(t, campaign.StateCompleted, st.State)
	require.Equal(t, "max duration 10m0s reached", st.Reason)
	require.Len(t, h.closes, 1)
	require.True(t, h.closes[0].Delete)
}

// During a rolling upgrade a newer SetRules activity can answer a
// workflow task of older code, which restarted the sessions on an include
// whatever the activity said. Replayed on this code, such a history must
// restart them too: the recorded include history with its SetRules
// result made a newer activity's ("pushed, no stale session") still
// replays (versionPushedRules).
func TestReplayOldIncludeWithANewerActivitysResult(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "campaign_history_include_before_pushed_rules.json"))
	require.NoError(t, err)
	h := &historypb.History{}
	require.NoError(t, protojson.Unmarshal(raw, h))
	scheduled := map[int64]string{}
	var set int
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil {
			scheduled[ev.GetEventId()] = a.GetActivityType().GetName()
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && scheduled[a.GetScheduledEventId()] == RulesActivity {
			p, err := converter.GetDefaultDataConverter().ToPayloads(RulesOutput{Pushed: true})
			require.NoError(t, err)
			a.Result = p
			set++
		}
	}
	require.Equal(t, 1, set, "the history's SetRules results")
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(Campaign, workflow.RegisterOptions{Name: WorkflowName})
	require.NoError(t, r.ReplayWorkflowHistory(nil, h))
}

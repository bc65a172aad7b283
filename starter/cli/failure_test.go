package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/workflows"
)

const missingTopic = `kafka sink 127.0.0.1:9092: topic "crawl.missing" does not exist (add ?create=true to create it)`

// sinkFailure is the status query's failure field for fetchers that all
// fail because the sink's topic is missing.
func sinkFailure(start time.Time) *workflows.FleetFailure {
	return &workflows.FleetFailure{
		Reason: "SinkUnavailable", Message: missingTopic, Fetcher: 3,
		At: start.Add(40 * time.Second), Since: start.Add(2 * time.Second), Consecutive: 12,
		Failing: 4, Desired: 4, FailAt: start.Add(5*time.Minute + 2*time.Second),
	}
}

// failedRun is the fake with a failed workflow: Result returns the
// campaign's error, which carries its final Status, as Temporal does.
type failedRun struct {
	*fakeTemporal
	err error
}

func (f *failedRun) Result(ctx context.Context, id string, result any) error {
	if ex, err := f.Describe(ctx, id); err == nil && ex.Status == StatusFailed {
		return f.err
	}
	return f.fakeTemporal.Result(ctx, id, result)
}

// campaignError is a failed campaign's error as the client gets it: the
// workflow's ApplicationError, its final Status as details, wrapped.
func campaignError(st workflows.Status) error {
	app := temporal.NewApplicationError("campaign c1 failed: "+st.Reason, "CampaignFailed", st)
	return fmt.Errorf("workflow execution error (type: Campaign, workflowID: c1): %w", app)
}

func TestStatusShowsFetchersFailing(t *testing.T) {
	fake := newFake()
	start := clock.Add(-time.Minute)
	fake.add("c1", workflows.Status{
		State: campaign.StateRunning, FetchersDesired: 4, Restarts: 12, StartedAt: start,
		Failure: sinkFailure(start),
	}, Execution{Status: StatusRunning, StartTime: start})

	code, out, errOut := run(t, fake, nil, "status", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "FAILING   4 of 4 fetchers, 12 failures in a row since")
	assert.Contains(t, out, "SinkUnavailable: "+missingTopic)
	assert.Contains(t, out, "the campaign fails at "+start.Add(5*time.Minute+2*time.Second).Local().Format(time.TimeOnly))

	code, out, errOut = run(t, fake, nil, "status", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var v struct {
		Failure map[string]any `json:"failure"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, "SinkUnavailable", v.Failure["reason"])
	assert.Equal(t, missingTopic, v.Failure["message"])
	assert.Equal(t, 12.0, v.Failure["consecutive"])
	assert.Equal(t, start.Add(2*time.Second).Format(time.RFC3339Nano), v.Failure["since"])
	assert.Equal(t, 4.0, v.Failure["failing"])
	assert.NotEmpty(t, v.Failure["fail_at"])
}

// A campaign that failed has no result: status reads its reason and final
// counts from the workflow's error.
func TestStatusOfFailedCampaign(t *testing.T) {
	start := clock.Add(-10 * time.Minute)
	fake := &failedRun{fakeTemporal: newFake(), err: campaignError(failedFinal(start))}
	fake.add("c1", workflows.Status{}, Execution{Status: StatusFailed, StartTime: start, CloseTime: start.Add(5 * time.Minute)})

	code, out, errOut := run(t, fake, nil, "status", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "campaign c1: failed (every fetcher failing with no page fetched for 5m0s (fail_after): SinkUnavailable: "+missingTopic+") [workflow Failed]")
	assert.Contains(t, out, "3 fetched")
	assert.NotContains(t, out, "FAILING", "an ended campaign's reason says it")

	code, out, errOut = run(t, fake, nil, "status", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var v View
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, campaign.StateFailed, v.State)
	assert.Contains(t, v.Reason, missingTopic)
	assert.EqualValues(t, 3, v.PagesFetched)
	require.NotNil(t, v.Failure)
	assert.Equal(t, "SinkUnavailable", v.Failure.Reason)
	assert.Empty(t, v.StatusError)
}

func failedFinal(start time.Time) workflows.Status {
	return workflows.Status{
		ID: "c1", State: campaign.StateFailed, PagesFetched: 3, StartedAt: start,
		Reason:  "every fetcher failing with no page fetched for 5m0s (fail_after): SinkUnavailable: " + missingTopic,
		Failure: sinkFailure(start),
	}
}

// start --wait shows the failure in its progress lines while the campaign
// runs, then exits 1 naming the reason when it fails; status --watch
// shows it too.
func TestWaitShowsFailureAndExitsWithReason(t *testing.T) {
	start := time.Now().Add(-time.Minute)
	running := workflows.Status{State: campaign.StateRunning, FetchersDesired: 4, StartedAt: start, Failure: sinkFailure(start)}
	fake := &failedRun{fakeTemporal: newFake(), err: campaignError(failedFinal(start))}
	hook := &startHook{fakeTemporal: fake.fakeTemporal, then: func() {
		fake.add("c1", running,
			Execution{Status: StatusRunning, StartTime: start},
			Execution{Status: StatusRunning, StartTime: start},
			Execution{Status: StatusFailed, StartTime: start, CloseTime: time.Now()})
	}}
	code, out, errOut := runApp(t, &App{Dial: dialTo(&failedRunStarter{failedRun: fake, hook: hook}), Stats: refusedStats},
		"start", "--id", "c1", "--seed", "https://a.example/", "--wait")

	assert.Equal(t, ExitFailure, code)
	assert.NotContains(t, out, "campaign c1 failed", "a failure goes to stderr")
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	require.GreaterOrEqual(t, len(lines), 2, errOut)
	assert.Contains(t, lines[0], "running: 0 pages")
	assert.Contains(t, lines[0], "FAILING: 4 of 4 fetchers, 12 failures in a row since")
	assert.Contains(t, lines[0], "SinkUnavailable: "+missingTopic)
	last := lines[len(lines)-1]
	assert.Contains(t, last, "campaign c1 failed")
	assert.Contains(t, last, "3 pages fetched")
	assert.Contains(t, last, `SinkUnavailable: kafka sink 127.0.0.1:9092: topic "crawl.missing" does not exist`)

	fake.add("c1", running, Execution{Status: StatusRunning, StartTime: start},
		Execution{Status: StatusFailed, StartTime: start, CloseTime: time.Now()})
	code, out, errOut = runApp(t, &App{Dial: dialTo(fake), Stats: refusedStats}, "status", "c1", "--watch")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "FAILING   4 of 4 fetchers")
	assert.Contains(t, out, "campaign c1: failed (every fetcher failing")
}

// failedRunStarter is failedRun whose Start creates the run (startHook).
type failedRunStarter struct {
	*failedRun
	hook *startHook
}

func (f *failedRunStarter) Start(ctx context.Context, req StartRequest) (string, error) {
	return f.hook.Start(ctx, req)
}

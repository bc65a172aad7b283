package workflows

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// sinkMissing is what FetchSession returns when the sink's Kafka topic does
// not exist: every session fails at once, and so would every retry.
func sinkMissing(env *testsuite.TestWorkflowEnvironment) {
	env.OnActivity(acts.FetchSession, mock.Anything, mock.Anything).Return(SessionCounters{},
		temporal.NewApplicationError(`kafka sink 127.0.0.1:9092: topic "crawl.missing" does not exist (add ?create=true to create it)`,
			"SinkUnavailable"))
}

// webUIDetails reads the workflow's current details, as the Web UI does.
func (h *harness) webUIDetails(d time.Duration, dst *string) {
	h.at(d, func() {
		v, err := h.env.QueryWorkflow("__temporal_workflow_metadata")
		require.NoError(h.t, err)
		var md sdkpb.WorkflowMetadata
		require.NoError(h.t, v.Get(&md))
		*dst = md.GetCurrentDetails()
	})
}

// failedStatus is the Status a failed campaign carries in its error.
func failedStatus(t *testing.T, err error) Status {
	t.Helper()
	var ae *temporal.ApplicationError
	require.ErrorAs(t, err, &ae)
	require.Equal(t, "CampaignFailed", ae.Type())
	var st Status
	require.NoError(t, ae.Details(&st))
	return st
}

// Fetchers that all fail for one reason (a missing Kafka topic)
// show it within 30 s in the status query, the Web UI and a notification,
// and the campaign fails after FailAfter of no page fetched, not before.
func TestFetchersFailingShownThenCampaignFails(t *testing.T) {
	h := newHarness(t, sinkMissing)
	cfg := testConfig()
	cfg.NotifyURL = "http://127.0.0.1:9/hook"
	var at30s, beforeFail Status
	var details string
	h.snapshot(30*time.Second, &at30s)
	h.webUIDetails(30*time.Second, &details)
	h.snapshot(5*time.Minute-time.Second, &beforeFail)

	h.env.ExecuteWorkflow(WorkflowName, CampaignInput{Config: cfg})

	require.True(t, h.env.IsWorkflowCompleted())
	f := at30s.Failure
	require.NotNil(t, f, "the status query shows the failure within 30 s")
	require.Equal(t, "SinkUnavailable", f.Reason)
	require.Contains(t, f.Message, `topic "crawl.missing" does not exist`)
	require.WithinDuration(t, at30s.StartedAt, f.Since, 0)
	require.GreaterOrEqual(t, f.Consecutive, 4, "both fetchers failed, were restarted and failed again")
	require.Equal(t, 2, f.Failing)
	require.Equal(t, 2, f.Desired)
	require.WithinDuration(t, at30s.StartedAt.Add(campaign.DefaultFailAfter), f.FailAt, 0)
	require.Contains(t, at30s.Alert, "every fetcher failing since")
	require.Contains(t, at30s.Alert, `topic "crawl.missing" does not exist`)
	require.Equal(t, campaign.StateRunning, at30s.State)

	require.Contains(t, details, "fetchers failing")
	require.Contains(t, details, `SinkUnavailable: kafka sink 127.0.0.1:9092: topic "crawl.missing" does not exist`)

	require.Equal(t, campaign.StateRunning, beforeFail.State, "not failed before FailAfter")

	err := h.env.GetWorkflowError()
	require.ErrorContains(t, err, "campaign c1 failed: every fetcher failing with no page fetched for 5m0s")
	require.ErrorContains(t, err, `SinkUnavailable: kafka sink 127.0.0.1:9092: topic "crawl.missing" does not exist`)
	st := failedStatus(t, err)
	require.Equal(t, campaign.StateFailed, st.State)
	require.Contains(t, st.Reason, "crawl.missing")
	require.Equal(t, "SinkUnavailable", st.Failure.Reason)
	require.WithinDuration(t, st.StartedAt.Add(campaign.DefaultFailAfter), h.closedAt, 0, "failed at FailAfter, not later")
	require.Len(t, h.closes, 1)
	require.False(t, h.closes[0].Delete, "a failed campaign keeps its queues")
	require.Equal(t, []string{"fetchers_failing", "failed"}, h.notified,
		"one exception naming the reason; the restart alert would only repeat it")
}

// A campaign whose fetchers keep failing but that still fetches pages
// between failures (Monitor's count rising) does not fail; the failure is
// still shown.
func TestFetchersFailingWithProgressDoNotFail(t *testing.T) {
	h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		// Each session fetches a little, then loses its scheduler.
		env.OnActivity(acts.FetchSession, mock.Anything, mock.Anything).After(20*time.Second).Return(
			SessionCounters{}, temporal.NewApplicationError("scheduler 127.0.0.1:7420 unreachable", "SchedulerUnreachable"))
	})
	cfg := testConfig()
	cfg.FailAfter = new(2 * time.Minute)
	for i := range 20 {
		h.at(time.Duration(i)*time.Minute+30*time.Second, func() { h.fetched.Store(int64(10 * (i + 1))) })
	}
	var mid Status
	h.snapshot(10*time.Minute+45*time.Second, &mid)
	h.at(20*time.Minute, func() { h.signal(SignalStop, nil) })

	st := h.run(CampaignInput{Config: cfg})

	require.Equal(t, campaign.StateStopped, st.State)
	require.NotNil(t, mid.Failure)
	require.Equal(t, "SchedulerUnreachable", mid.Failure.Reason)
	require.Equal(t, int64(100), mid.PagesFetched)
	require.Less(t, mid.Failure.Consecutive, 8, "the streak ends at each page fetched")
}

// Paused time does not count towards FailAfter, and a resume gives the
// fetchers a fresh start: FailAfter counts again from the resume.
func TestFailAfterCountsFromResume(t *testing.T) {
	h := newHarness(t, sinkMissing)
	var paused, resumed Status
	h.at(3*time.Minute, func() { h.signal(SignalPause, nil) })
	h.snapshot(4*time.Minute, &paused)
	h.at(10*time.Minute, func() { h.signal(SignalResume, nil) })
	h.snapshot(10*time.Minute+30*time.Second, &resumed)

	h.env.ExecuteWorkflow(WorkflowName, CampaignInput{Config: testConfig()})

	require.Equal(t, campaign.StatePaused, paused.State)
	require.True(t, paused.Failure.FailAt.IsZero(), "no fail time while paused")
	require.Equal(t, campaign.StateRunning, resumed.State)
	require.WithinDuration(t, resumed.StartedAt.Add(15*time.Minute), resumed.Failure.FailAt, 0)
	st := failedStatus(t, h.env.GetWorkflowError())
	require.Equal(t, campaign.StateFailed, st.State)
	require.WithinDuration(t, st.StartedAt.Add(15*time.Minute), h.closedAt, 0)
}

// One fetcher failing while the other works is shown, but is no reason to
// fail the campaign however long it lasts.
func TestOneFetcherFailingDoesNotFailCampaign(t *testing.T) {
	h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.FetchSession, mock.Anything, mock.MatchedBy(func(in FetchSessionInput) bool {
			return in.Index == 0
		})).Return(SessionCounters{}, errors.New("worker out of file descriptors"))
	})
	var mid Status
	h.snapshot(20*time.Minute, &mid)
	h.at(21*time.Minute, func() { h.signal(SignalStop, nil) })

	st := h.run(CampaignInput{Config: testConfig()})

	require.Equal(t, campaign.StateStopped, st.State)
	require.Equal(t, 1, mid.Failure.Failing)
	require.True(t, mid.Failure.FailAt.IsZero())
	require.Contains(t, mid.Failure.Message, "out of file descriptors")
}

// A run started before fail-after existed replays as it ran: no timer, no
// notification, no failure (they would not match its history).
func TestFailAfterOffForOlderRuns(t *testing.T) {
	h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		sinkMissing(env)
		env.OnGetVersion(versionFailAfter, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	})
	cfg := testConfig()
	cfg.NotifyURL = "http://127.0.0.1:9/hook"
	var mid Status
	h.snapshot(9*time.Minute, &mid)
	h.at(10*time.Minute, func() { h.signal(SignalStop, nil) })

	st := h.run(CampaignInput{Config: cfg})

	require.Equal(t, campaign.StateStopped, st.State)
	require.Equal(t, "SinkUnavailable", mid.Failure.Reason, "the failure is still shown")
	require.True(t, mid.Failure.FailAt.IsZero())
	require.Equal(t, []string{"fetcher_restarts", "stopped"}, h.notified)
}

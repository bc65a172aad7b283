package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// TestEachRunHasItsOwnFrontierKey: a campaign names its run once, gives
// that key to every activity that reaches the frontier, and reports it;
// a second run of the same ID has another key, so it cannot find the
// first run's marks.
func TestEachRunHasItsOwnFrontierKey(t *testing.T) {
	var keys []string
	for range 2 {
		h := newHarness(t, nil)
		_, st := h.runToEnd(testConfig(), &h.drained)
		require.Equal(t, campaign.StateCompleted, st.State)
		require.True(t, strings.HasPrefix(st.Frontier, "c1"+campaign.RunSep), "frontier key %q", st.Frontier)
		require.Equal(t, map[string]bool{st.Frontier: true}, h.frontiers, "Seed, FetchSession and Monitor")
		require.Len(t, h.closes, 1)
		require.Equal(t, st.Frontier, h.closes[0].Config.FrontierKey())
		require.NoError(t, h.closes[0].Config.Validate())
		keys = append(keys, st.Frontier)
	}
	require.NotEqual(t, keys[0], keys[1], "two runs of one ID share a frontier key")
}

// TestRunNamedByTheStarterIsKept: a starter that names the run knows the
// key before the workflow runs.
func TestRunNamedByTheStarterIsKept(t *testing.T) {
	h := newHarness(t, nil)
	cfg := testConfig()
	cfg.Run = "given1"
	_, st := h.runToEnd(cfg, &h.drained)
	require.Equal(t, "c1~given1", st.Frontier)
	require.Equal(t, map[string]bool{"c1~given1": true}, h.frontiers)
}

// TestContinueAsNewKeepsTheRun: the next run of the history goes on with
// the same frontier, and a continued campaign is not renamed.
func TestContinueAsNewKeepsTheRun(t *testing.T) {
	h := newHarness(t, nil)
	h.at(2*time.Minute, func() { h.env.SetCurrentHistoryLength(150) })
	h.env.ExecuteWorkflow(WorkflowName, CampaignInput{Config: testConfig(), HistoryLimit: 100})
	var can *workflow.ContinueAsNewError
	require.ErrorAs(t, h.env.GetWorkflowError(), &can)
	var next CampaignInput
	require.NoError(t, converter.GetDefaultDataConverter().FromPayloads(can.Input, &next))
	require.Len(t, h.frontiers, 1)
	for k := range h.frontiers {
		require.Equal(t, k, next.Config.FrontierKey())
	}

	// A continued campaign that had no run (started before runs had names)
	// keeps its ID as the key.
	h2 := newHarness(t, nil)
	h2.at(5*time.Minute, func() { h2.drained.Store(true) })
	st := h2.run(CampaignInput{Config: testConfig(), State: next.State, HistoryLimit: 100})
	require.Equal(t, "c1", st.Frontier)
	require.Equal(t, map[string]bool{"c1": true}, h2.frontiers)
}

// TestCloseErrorIsReported: a Close that fails (a scheduler it cannot
// reach) leaves the campaign completed, with the error in CloseError, so
// that `starter stop` knows to remove what the campaign left behind.
func TestCloseErrorIsReported(t *testing.T) {
	var h *harness
	h = newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.Close, mock.Anything, mock.Anything).Return(
			func(context.Context, CloseInput) (CloseResult, error) {
				defer h.calls.Done() // the harness counts every Close call
				return CloseResult{}, temporal.NewNonRetryableApplicationError("scheduler 127.0.0.1:9 unreachable", "Unreachable", nil)
			})
	})
	_, st := h.runToEnd(testConfig(), &h.drained)
	require.Equal(t, campaign.StateCompleted, st.State)
	require.Contains(t, st.CloseError, "scheduler 127.0.0.1:9 unreachable")
	require.Contains(t, st.Reason, "close failed")

	h = newHarness(t, nil)
	_, st = h.runToEnd(testConfig(), &h.drained)
	require.Empty(t, st.CloseError, "a close that worked")
}

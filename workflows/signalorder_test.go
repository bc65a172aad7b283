package workflows

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// orderProbe is the naive "one goroutine per signal channel appends to one
// shared slice" design. It exists only to show, in
// TestSDKDoesNotKeepOrderAcrossSignalChannels, why Campaign does not use it.
func orderProbe(ctx workflow.Context) ([]string, error) {
	var seen []string
	for _, name := range []string{SignalPause, SignalResume} {
		ch := workflow.GetSignalChannel(ctx, name)
		workflow.Go(ctx, func(ctx workflow.Context) {
			for {
				ch.Receive(ctx, nil)
				seen = append(seen, name)
			}
		})
	}
	workflow.GetSignalChannel(ctx, "done").Receive(ctx, nil)
	err := workflow.Await(ctx, func() bool { return len(seen) == 2 })
	return seen, err
}

// The evidence behind Campaign's control design: when several signals land in
// one workflow task, the SDK puts each into its channel's buffer before any
// workflow code runs, and then runs coroutines in creation order, so the
// order of events across channels is gone. Two opposite sends give the same
// observed order.
func TestSDKDoesNotKeepOrderAcrossSignalChannels(t *testing.T) {
	observe := func(first, second string) []string {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterDelayedCallback(func() {
			env.SignalWorkflowSkippingWorkflowTask(first, nil)
			env.SignalWorkflowSkippingWorkflowTask(second, nil)
			env.SignalWorkflow("done", nil)
		}, 1)
		env.ExecuteWorkflow(orderProbe)
		require.NoError(t, env.GetWorkflowError())
		var seen []string
		require.NoError(t, env.GetWorkflowResult(&seen))
		return seen
	}
	a := observe(SignalPause, SignalResume)
	b := observe(SignalResume, SignalPause)
	require.Len(t, a, 2)
	require.Equal(t, a, b, "the SDK kept the order after all: Campaign's pause-wins rule could become exact ordering")
}

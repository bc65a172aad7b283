package workflows

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// TestRecordedInputDurations reads the input of a campaign recorded before
// durations were strings (nanoseconds in its history) through the SDK's
// data converter, as a worker replaying it does, and writes it back as the
// Web UI will show a new campaign's input: durations as "20s".
func TestRecordedInputDurations(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "failed_campaign_history.json"))
	require.NoError(t, err)
	defer f.Close()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	require.NoError(t, err)
	payloads := h.GetEvents()[0].GetWorkflowExecutionStartedEventAttributes().GetInput()
	require.Contains(t, string(payloads.GetPayloads()[0].GetData()), `"fail_after":20000000000`, "the recorded input holds nanoseconds")

	dc := converter.GetDefaultDataConverter()
	var in CampaignInput
	require.NoError(t, dc.FromPayloads(payloads, &in))
	cfg := in.Config
	require.Equal(t, time.Second, cfg.HostDelay())
	require.Equal(t, 15*time.Second, cfg.HostRetryBackoff())
	require.Equal(t, 20*time.Second, cfg.FailAfterDuration())

	out, err := dc.ToPayloads(in)
	require.NoError(t, err)
	data := string(out.GetPayloads()[0].GetData())
	for _, want := range []string{`"per_host_delay":"1s"`, `"retry_backoff":"15s"`, `"fail_after":"20s"`} {
		require.True(t, strings.Contains(data, want), "new input lacks %s: %s", want, data)
	}
	var again CampaignInput
	require.NoError(t, dc.FromPayloads(out, &again))
	require.Equal(t, in, again)
}

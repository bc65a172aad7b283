package cli

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/workflows"
)

// TestWebUIBase: the links' base is TEMPORAL_UI_URL when set (TEMPORAL_UI,
// its old name, otherwise); without either it is derived only for a dev
// server on loopback, whose Web UI is on its frontend port + 1000. For any
// other TEMPORAL_ADDRESS it is unknown rather than a guess that points
// nowhere (it used to be HOST:8233 whatever the address).
func TestWebUIBase(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  Env
		want string
	}{
		{"defaults", Env{}, "http://127.0.0.1:8233/namespaces/default/workflows/c1"},
		{"dev server on another port", Env{Env: envconf.Env{TemporalAddress: "127.0.0.1:7300"}}, "http://127.0.0.1:8300/namespaces/default/workflows/c1"},
		{"localhost", Env{Env: envconf.Env{TemporalAddress: "localhost:7233", TemporalNamespace: "crawl"}}, "http://localhost:8233/namespaces/crawl/workflows/c1"},
		{"other loopback address", Env{Env: envconf.Env{TemporalAddress: "127.4.0.1:7233"}}, "http://127.4.0.1:8233/namespaces/default/workflows/c1"},
		{"IPv6 loopback", Env{Env: envconf.Env{TemporalAddress: "[::1]:7233"}}, "http://[::1]:8233/namespaces/default/workflows/c1"},
		{"loopback without a port", Env{Env: envconf.Env{TemporalAddress: "127.0.0.1"}}, "http://127.0.0.1:8233/namespaces/default/workflows/c1"},
		{"remote server: unknown", Env{Env: envconf.Env{TemporalAddress: "temporal.internal:7233"}}, ""},
		{"remote IP: unknown", Env{Env: envconf.Env{TemporalAddress: "10.1.2.3:7233"}}, ""},
		{"remote server and TEMPORAL_UI_URL", Env{Env: envconf.Env{TemporalAddress: "temporal.internal:7233", TemporalNamespace: "crawl", TemporalUIURL: "https://temporal-ui.example/"}}, "https://temporal-ui.example/namespaces/crawl/workflows/c1"},
		{"TEMPORAL_UI_URL wins over loopback", Env{Env: envconf.Env{TemporalUIURL: "http://127.0.0.1:41234"}}, "http://127.0.0.1:41234/namespaces/default/workflows/c1"},
		{"TEMPORAL_UI, deprecated", Env{Env: envconf.Env{TemporalAddress: "temporal.internal:7233", TemporalUI: "https://old.example"}}, "https://old.example/namespaces/default/workflows/c1"},
		{"TEMPORAL_UI_URL wins over TEMPORAL_UI", Env{Env: envconf.Env{TemporalUI: "https://old.example", TemporalUIURL: "https://new.example"}}, "https://new.example/namespaces/default/workflows/c1"},
		{"path under a proxy", Env{Env: envconf.Env{TemporalUIURL: "https://ops.example/temporal/"}}, "https://ops.example/temporal/namespaces/default/workflows/c1"},
		{"namespace escaped", Env{Env: envconf.Env{TemporalNamespace: "a b"}}, "http://127.0.0.1:8233/namespaces/a%20b/workflows/c1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.env.withDefaults().WorkflowURL("c1"))
		})
	}
}

// runEnv runs the starter against a fake Temporal holding a running
// campaign c1, with env.
func runEnv(t *testing.T, env Env, args ...string) (int, string, string) {
	t.Helper()
	fake := newFake()
	fake.add("c1", workflows.Status{State: campaign.StateRunning, FetchersDesired: 1},
		Execution{Status: StatusRunning, StartTime: time.Now()})
	return runApp(t, &App{Env: env, Dial: dialTo(fake), Stats: refusedStats}, args...)
}

// TestStartPrintsWebUILink: what `start` prints and returns as web_ui
// follows the setting, says what to set when the link is unknown, and
// TEMPORAL_UI still works with a deprecation warning.
func TestStartPrintsWebUILink(t *testing.T) {
	start := []string{"start", "--id", "c2", "--seed", "https://a.example/"}

	code, out, errOut := runEnv(t, Env{Env: envconf.Env{TemporalAddress: "temporal.internal:7233", TemporalUIURL: "https://ui.example"}}, start...)
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  Web UI: https://ui.example/namespaces/default/workflows/c2\n")
	assert.Empty(t, errOut)

	code, out, errOut = runEnv(t, Env{Env: envconf.Env{TemporalAddress: "temporal.internal:7233"}}, start...)
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  Web UI: unknown for TEMPORAL_ADDRESS temporal.internal:7233; set TEMPORAL_UI_URL to link it\n")
	assert.NotContains(t, out, "8233")

	code, out, errOut = runEnv(t, Env{Env: envconf.Env{TemporalAddress: "temporal.internal:7233"}}, append(start, "--json")...)
	require.Equal(t, ExitOK, code, errOut)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, "", res["web_ui"])

	code, out, errOut = runEnv(t, Env{Env: envconf.Env{TemporalUI: "https://old.example"}}, start...)
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  Web UI: https://old.example/namespaces/default/workflows/c2\n")
	assert.Equal(t, "starter: TEMPORAL_UI is deprecated; set TEMPORAL_UI_URL instead\n", errOut)

	code, out, errOut = runEnv(t, Env{Env: envconf.Env{TemporalUI: "https://old.example", TemporalUIURL: "https://new.example"}}, start...)
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  Web UI: https://new.example/namespaces/default/workflows/c2\n")
	assert.Equal(t, "starter: TEMPORAL_UI is deprecated and ignored: TEMPORAL_UI_URL is set\n", errOut)
}

// TestStatusWebUILink: `status` shows the same link, or what to set.
func TestStatusWebUILink(t *testing.T) {
	code, out, errOut := runEnv(t, Env{Env: envconf.Env{TemporalUIURL: "https://ui.example"}}, "status", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  Web UI: https://ui.example/namespaces/default/workflows/c1\n")

	code, out, errOut = runEnv(t, Env{Env: envconf.Env{TemporalAddress: "temporal.internal:7233"}}, "status", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  Web UI: unknown; set TEMPORAL_UI_URL to link it\n")
}

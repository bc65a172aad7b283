package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

func startedConfig(t *testing.T, fake *fakeTemporal) campaign.Config {
	t.Helper()
	require.Len(t, fake.started, 1)
	in, ok := fake.started[0].Input.(workflows.CampaignInput)
	require.True(t, ok, "workflow input is %T", fake.started[0].Input)
	return in.Config
}

func TestStartAllFlags(t *testing.T) {
	fake := newFake()
	code, out, errOut := run(t, fake, nil, "start",
		"--id", "c1", "--seed", "https://a.example/", "--seed", "https://b.example/x?a=1,2",
		"--scope", `^https://[ab]\.example/`, "--scope", `x{1,3}`, "--exclude", `\.pdf$`,
		"--fetchers", "7", "--max-pages", "1000", "--max-pages-per-host", "50", "--max-depth", "4",
		"--max-duration", "90m", "--per-host-concurrency", "2", "--per-host-delay", "250ms",
		"--host-retries", "5", "--retry-backoff", "2s", "--fail-after", "10m",
		"--priority", "fair", "--user-agent", "ua/1", "--sitemaps", "--drop-param", "utm_source",
		"--drop-param", "sid", "--notify-url", "https://hooks.example/n", "--sink", "warc:/tmp/w",
		"--sink", "kafka://127.0.0.1:9092/t", "--allow-private")
	require.Equal(t, ExitOK, code, errOut)

	want := campaign.Config{
		ID: "c1", Seeds: []string{"https://a.example/", "https://b.example/x?a=1,2"},
		Scope: []string{`^https://[ab]\.example/`, `x{1,3}`}, Exclude: []string{`\.pdf$`},
		Fetchers: 7, MaxPages: 1000, MaxPagesPerHost: 50, MaxDepth: new(4), MaxDuration: 90 * time.Minute,
		PerHostConcurrency: 2, PerHostDelay: new(250 * time.Millisecond), Priority: "fair", UserAgent: "ua/1",
		HostRetries: new(5), RetryBackoff: new(2 * time.Second), FailAfter: new(10 * time.Minute),
		Sitemaps: true, DropParams: []string{"utm_source", "sid"}, NotifyURL: "https://hooks.example/n",
		Sinks: []string{"warc:/tmp/w", "kafka://127.0.0.1:9092/t"}, AllowPrivate: true,
	}.WithDefaults()
	assert.Equal(t, want, startedConfig(t, fake))

	req := fake.started[0]
	assert.Equal(t, "c1", req.ID)
	assert.Equal(t, workflows.TaskQueue, req.TaskQueue)
	assert.Equal(t, workflows.WorkflowName, req.Workflow)
	assert.Equal(t, "crawl of https://a.example/, https://b.example/x?a=1,2 with 7 fetchers", req.Summary)
	assert.Contains(t, req.Details, "`warc:/tmp/w`")
	state, ok := req.SearchAttributes.GetKeyword(workflows.CampaignStateKey)
	assert.True(t, ok)
	assert.Equal(t, campaign.StateRunning, state)
	pages, ok := req.SearchAttributes.GetInt64(workflows.PagesFetchedKey)
	assert.True(t, ok)
	assert.Zero(t, pages)
	assert.Contains(t, out, "http://127.0.0.1:8233/namespaces/default/workflows/c1")
}

func TestStartDefaults(t *testing.T) {
	fake := newFake()
	code, _, errOut := run(t, fake, nil, "start", "--id", "c1", "--seed", "https://a.example/")
	require.Equal(t, ExitOK, code, errOut)
	cfg := startedConfig(t, fake)
	assert.Equal(t, campaign.DefaultFetchers, cfg.Fetchers)
	assert.Equal(t, time.Second, cfg.HostDelay())
	assert.Equal(t, 1, cfg.PerHostConcurrency)
	assert.Equal(t, campaign.DefaultUserAgent, cfg.UserAgent)
	assert.Equal(t, []string{campaign.DefaultSink}, cfg.Sinks)
}

func TestStartFileMergedWithFlags(t *testing.T) {
	path := filepath.Join(t.TempDir(), "campaign.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
id: from-file
seeds: [https://file.example/]
scope: ['^https://file\.example/']
fetchers: 3
max_pages: 500
per_host_delay: 2s
max_duration: 1h
sitemaps: true
sinks: [warc:/tmp/file]
`), 0o600))

	fake := newFake()
	code, _, errOut := run(t, fake, nil, "start", "-f", path, "--fetchers", "9", "--seed", "https://flag.example/")
	require.Equal(t, ExitOK, code, errOut)
	cfg := startedConfig(t, fake)
	assert.Equal(t, "from-file", cfg.ID)
	assert.Equal(t, []string{"https://flag.example/"}, cfg.Seeds, "a repeatable flag replaces the file's list")
	assert.Equal(t, []string{`^https://file\.example/`}, cfg.Scope)
	assert.Equal(t, 9, cfg.Fetchers, "a flag given overrides the file")
	assert.Equal(t, int64(500), cfg.MaxPages)
	assert.Equal(t, 2*time.Second, cfg.HostDelay(), "a flag not given leaves the file's value")
	assert.Equal(t, time.Hour, cfg.MaxDuration)
	assert.True(t, cfg.Sitemaps)
	assert.Equal(t, []string{"warc:/tmp/file"}, cfg.Sinks)
}

func TestStartFileErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "campaign.yaml")
	require.NoError(t, os.WriteFile(path, []byte("id: x\nseeds: [https://a.example/]\nfetcherz: 3\n"), 0o600))
	code, _, errOut := run(t, newFake(), nil, "start", "-f", path)
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "field fetcherz not found")

	code, _, errOut = run(t, newFake(), nil, "start", "-f", filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "no such file")
}

func TestStartUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"start", "--id", "c", "--seed", "https://a/", "--bogus"}, "Error: unknown flag: --bogus\nRun 'starter start --help' for usage.\n"},
		{"missing id", []string{"start", "--seed", "https://a/"}, "required flag --id not set"},
		{"missing seed", []string{"start", "--id", "c"}, "required flag --seed not set"},
		{"bad duration", []string{"start", "--id", "c", "--seed", "https://a/", "--max-duration", "5q"}, `invalid argument "5q" for "--max-duration"`},
		{"bad number", []string{"start", "--id", "c", "--seed", "https://a/", "--fetchers", "many"}, `invalid argument "many" for "--fetchers"`},
		{"unknown command", []string{"begin"}, `unknown command "begin" for "starter"`},
		{"status without ID", []string{"status"}, "status takes ID"},
		{"scale not a number", []string{"scale", "c", "lots"}, `N "lots": must be a whole number`},
		{"restart without fetcher", []string{"restart", "c"}, `required flag(s) "fetcher" not set`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFake()
			code, out, errOut := run(t, fake, nil, tc.args...)
			assert.Equal(t, ExitUsage, code)
			assert.Contains(t, errOut, tc.want)
			assert.Contains(t, errOut, "--help' for usage.")
			assert.NotContains(t, errOut, "Flags:", "no usage dump")
			assert.Empty(t, out)
			assert.Empty(t, fake.started)
		})
	}
}

func TestStartValidationErrors(t *testing.T) {
	fake := newFake()
	code, out, errOut := run(t, fake, nil, "start", "--id", "c1", "--seed", "ftp://a.example/", "--fetchers", "5000")
	assert.Equal(t, ExitUsage, code)
	assert.Equal(t, "seed \"ftp://a.example/\": must be an http or https URL\nfetchers 5000: must be between 1 and 1024 (`starter scale ID 0` idles a running campaign)\n", errOut,
		"Validate's messages, as they are")
	assert.Empty(t, out)
	assert.Empty(t, fake.started)
}

func TestStartAlreadyRunning(t *testing.T) {
	fake := newFake()
	startedAt := time.Date(2026, 5, 1, 10, 0, 0, 0, time.Local)
	fake.add("c1", workflows.Status{}, Execution{Status: StatusRunning, StartTime: startedAt})
	code, out, errOut := run(t, fake, nil, "start", "--id", "c1", "--seed", "https://a.example/")
	assert.Equal(t, ExitFailure, code)
	assert.Empty(t, out)
	assert.Equal(t, "campaign c1 is already running (started "+startedAt.Format("2006-01-02 15:04:05 MST")+
		"); stop it first or pick another --id\n", errOut)
}

func TestStartJSON(t *testing.T) {
	code, out, errOut := run(t, newFake(), nil, "start", "--id", "c1", "--seed", "https://a.example/", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var res map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.Equal(t, "c1", res["id"])
	assert.Equal(t, "run-1", res["run_id"])
	assert.Equal(t, "running", res["state"])
	assert.Equal(t, "http://127.0.0.1:8233/namespaces/default/workflows/c1", res["web_ui"])
}

func TestTemporalUnreachable(t *testing.T) {
	var errb strings.Builder
	app := &App{Out: &strings.Builder{}, Err: &errb, Dial: DialTemporal,
		Env: Env{Env: envconf.Env{TemporalAddress: "127.0.0.1:1"}}}
	code := app.Run(context.Background(), []string{"status", "c1"})
	assert.Equal(t, ExitFailure, code)
	assert.Regexp(t, "^cannot reach Temporal at 127.0.0.1:1: .+; start the dev stack with `make dev` or set TEMPORAL_ADDRESS\n$", errb.String())
}

func TestWaitExitCodes(t *testing.T) {
	begin := time.Now().Add(-time.Minute)
	for _, tc := range []struct {
		name   string
		closed Execution
		result string // the state in the workflow's result
		want   int
		line   string
	}{
		{"completed", Execution{Status: StatusCompleted}, campaign.StateCompleted, ExitOK, "campaign c1 completed"},
		{"max pages reached", Execution{Status: StatusCompleted}, "", ExitOK, "campaign c1 completed"},
		{"stopped", Execution{Status: StatusCompleted}, campaign.StateStopped, ExitFailure, "campaign c1 stopped"},
		{"failed state", Execution{Status: StatusCompleted}, campaign.StateFailed, ExitFailure, "campaign c1 failed"},
		{"workflow failed", Execution{Status: StatusFailed}, "", ExitFailure, "campaign c1 failed"},
		{"terminated", Execution{Status: StatusTerminated}, "", ExitFailure, "campaign c1 stopped"},
		{"canceled", Execution{Status: StatusCanceled}, "", ExitFailure, "campaign c1 stopped"},
		{"timed out", Execution{Status: StatusTimedOut}, "", ExitFailure, "campaign c1 failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.closed.StartTime, tc.closed.CloseTime = begin, time.Now()
			code, out, errOut := runWait(t, newFake(), tc.closed, tc.result)
			assert.Equal(t, tc.want, code, errOut)
			if tc.want == ExitOK {
				assert.Contains(t, out, tc.line)
			} else {
				assert.NotContains(t, out, tc.line)
				assert.Contains(t, errOut, tc.line, "a campaign that did not complete is a failure, on stderr")
			}
		})
	}
	assert.Equal(t, 0, ExitCode(campaign.StateCompleted))
	assert.Equal(t, 1, ExitCode(campaign.StateStopped))
	assert.Equal(t, 1, ExitCode(campaign.StateFailed))
}

// runWait starts c1 with --wait on a fake whose run is running twice and
// then closed as given.
func runWait(t *testing.T, fake *fakeTemporal, closed Execution, resultState string, extra ...string) (int, string, string) {
	t.Helper()
	starting := &startHook{fakeTemporal: fake, then: func() {
		r := fake.add("c1", workflows.Status{State: campaign.StateRunning, PagesFetched: 10},
			Execution{Status: StatusRunning, StartTime: closed.StartTime},
			Execution{Status: StatusRunning, StartTime: closed.StartTime},
			closed)
		r.result = workflows.Status{State: resultState, PagesFetched: 42}
	}}
	args := append([]string{"start", "--id", "c1", "--seed", "https://a.example/", "--wait"}, extra...)
	return runApp(t, &App{Dial: dialTo(starting), Stats: refusedStats}, args...)
}

// startHook creates the fake run when the campaign is started.
type startHook struct {
	*fakeTemporal
	then func()
}

func (s *startHook) Start(ctx context.Context, req StartRequest) (string, error) {
	id, err := s.fakeTemporal.Start(ctx, req)
	if err == nil {
		s.then()
	}
	return id, err
}

func TestWaitJSONPrintsFinalStatus(t *testing.T) {
	now := time.Now()
	code, out, errOut := runWait(t, newFake(), Execution{Status: StatusCompleted, StartTime: now.Add(-time.Minute), CloseTime: now}, campaign.StateCompleted, "--json")
	require.Equal(t, ExitOK, code, errOut)
	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, "completed", v["state"])
	assert.EqualValues(t, 42, v["pages_fetched"])
	assert.Contains(t, errOut, "running: 10 pages", "progress goes to stderr")
}

func TestStatusJSON(t *testing.T) {
	fake := newFake()
	hb := time.Now().Add(-3 * time.Second).UTC()
	fake.add("c1", workflows.Status{
		State: campaign.StatePaused, FetchersDesired: 3, FetchersActive: 2, PagesFetched: 100, PagesFailed: 4,
		URLsQueued: 7, URLsInFlight: 1, Restarts: 2, Frontier: "c1~0mxb1",
		Fetchers: []workflows.FetcherStatus{{Index: 0}, {Index: 1, Restarts: 2}, {Index: 2}, {Index: 3}},
	}, Execution{Status: StatusRunning, StartTime: time.Now().Add(-time.Hour), Pending: []PendingActivity{
		{ActivityID: "fetcher-0-1", Type: "FetchSession", State: "Started", Worker: "w1@host", Attempt: 1, LastHeartbeat: hb,
			Counters: &workflows.SessionCounters{Index: 0, Fetched: 60, Errors: 1}},
		{ActivityID: "fetcher-1-3", Type: "FetchSession", State: "Started", Worker: "w2@host", Attempt: 3, LastHeartbeat: hb,
			Counters: &workflows.SessionCounters{Index: 1, Fetched: 45, Errors: 2}},
		// Not yet heartbeated: its index comes from the activity ID.
		{ActivityID: "fetcher-2-1", Type: "FetchSession", State: "Scheduled", Attempt: 1},
		// Monitor heartbeats too; its details decode as SessionCounters
		// (JSON), but it is no fetcher.
		{ActivityID: "12", Type: "Monitor", State: "Started", Worker: "w9@host", LastHeartbeat: hb,
			Counters: &workflows.SessionCounters{Index: 0}},
	}})
	stats := func(_ context.Context, addrs []string, token, id string) (session.Stats, error) {
		assert.Equal(t, []string{envconf.DefaultScheduler}, addrs)
		assert.Equal(t, "c1~0mxb1", id, "the schedulers know the run by its frontier key")
		return session.Stats{Fetched: 110, Failed: 4, Queued: 30, Held: 12, InFlight: 5}, nil
	}
	code, out, errOut := run(t, fake, stats, "status", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)

	var v map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	for key, want := range map[string]any{
		"id": "c1", "frontier": "c1~0mxb1", "state": "paused", "fetchers_desired": 3.0, "fetchers_active": 2.0,
		// queued: 30 ready in RabbitMQ + 12 held by the scheduler - 5 leased
		"pages_fetched": 110.0, "pages_failed": 4.0, "urls_queued": 37.0, "urls_in_flight": 5.0,
		// read from the scheduler now
		"counts_at": clock.Format(time.RFC3339Nano),
	} {
		assert.Equal(t, want, v[key], key)
	}
	fetchers := v["fetchers"].([]any)
	require.Len(t, fetchers, 4, "three sessions pending and one the workflow knows of")
	assert.Equal(t, "w1@host", fetchers[0].(map[string]any)["worker"], "the Monitor activity is not fetcher 0")
	f1 := fetchers[1].(map[string]any)
	assert.Equal(t, 1.0, f1["index"])
	assert.Equal(t, "w2@host", f1["worker"])
	assert.Equal(t, 45.0, f1["pages"])
	assert.Equal(t, 2.0, f1["errors"])
	assert.Equal(t, 2.0, f1["restarts"])
	assert.Equal(t, 3.0, f1["attempt"])
	assert.Equal(t, hb.Format(time.RFC3339Nano), f1["last_heartbeat"])
	assert.Equal(t, "Scheduled", fetchers[2].(map[string]any)["state"])
	assert.Equal(t, "Idle", fetchers[3].(map[string]any)["state"])
}

func TestStatusWithoutScheduler(t *testing.T) {
	fake := newFake()
	fake.add("c1", workflows.Status{State: campaign.StateRunning, FetchersDesired: 1, PagesFetched: 9, URLsQueued: 3},
		Execution{Status: StatusRunning, StartTime: time.Now()})
	code, out, errOut := run(t, fake, nil, "status", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "campaign c1: running")
	assert.Contains(t, out, "9 fetched")
	assert.Contains(t, out, "3 queued")
	assert.Contains(t, out, "no scheduler reachable at 127.0.0.1:7420")
	assert.Contains(t, out, "which has read none from the schedulers yet", "no reading, and the status says so")
}

// With no scheduler answering, status shows the workflow's last counts
// and how old they are, not zeros.
func TestStatusWithoutSchedulerShowsLastCountsAndTheirAge(t *testing.T) {
	fake := newFake()
	readAt := clock.Add(-3*time.Minute - 5*time.Second)
	fake.add("c1", workflows.Status{State: campaign.StateRunning, FetchersDesired: 1, PagesFetched: 9272, PagesFailed: 3, URLsQueued: 10728, CountsAt: readAt},
		Execution{Status: StatusRunning, StartTime: clock.Add(-time.Hour)})
	code, out, errOut := run(t, fake, nil, "status", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "9272 fetched, 3 failed")
	assert.Contains(t, out, "10728 queued")
	assert.Contains(t, out, "the counts are the workflow's last reading, from "+readAt.Local().Format(time.TimeOnly)+" (3m05s ago)")

	code, out, errOut = run(t, fake, nil, "status", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var v View
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.EqualValues(t, 9272, v.PagesFetched)
	require.NotNil(t, v.CountsAt, out)
	assert.True(t, v.CountsAt.Equal(readAt), "counts_at %s, want %s", v.CountsAt, readAt)
	assert.Contains(t, v.SchedulerError, "no scheduler reachable")
}

func TestStatusClosedCampaign(t *testing.T) {
	fake := newFake()
	begin := time.Now().Add(-time.Hour)
	fake.add("done", workflows.Status{State: campaign.StateStopped, PagesFetched: 77},
		Execution{Status: StatusCompleted, StartTime: begin, CloseTime: begin.Add(time.Minute)})
	fake.add("killed", workflows.Status{}, Execution{Status: StatusTerminated, StartTime: begin, CloseTime: begin, PagesFetched: 12, State: "running"})

	code, out, _ := run(t, fake, nil, "status", "done", "--json")
	require.Equal(t, ExitOK, code)
	var v View
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, "stopped", v.State)
	assert.EqualValues(t, 77, v.PagesFetched)

	code, out, _ = run(t, fake, nil, "status", "killed", "--json")
	require.Equal(t, ExitOK, code)
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	assert.Equal(t, "stopped", v.State, "terminated from the Web UI ends a campaign like stop")
	assert.EqualValues(t, 12, v.PagesFetched)
}

func TestUnknownCampaign(t *testing.T) {
	for _, args := range [][]string{{"status", "nope"}, {"pause", "nope"}, {"resume", "nope"}, {"stop", "nope"},
		{"restart", "nope", "--fetcher", "1"}, {"scale", "nope", "3"}} {
		code, out, errOut := run(t, newFake(), nil, args...)
		assert.Equal(t, ExitFailure, code, args)
		assert.Equal(t, "no campaign nope\n", errOut, args)
		assert.Empty(t, out)
	}
}

func TestSignals(t *testing.T) {
	fake := newFake()
	fake.add("c1", workflows.Status{}, Execution{Status: StatusRunning})
	for _, args := range [][]string{{"pause", "c1"}, {"resume", "c1"}, {"stop", "c1", "--no-wait"}, {"restart", "c1", "--fetcher", "2"}} {
		code, _, errOut := run(t, fake, nil, args...)
		require.Equal(t, ExitOK, code, errOut)
	}
	assert.Equal(t, []sentSignal{
		{"c1", workflows.SignalPause, workflows.PauseSignal{Seq: clock.UnixNano()}},
		{"c1", workflows.SignalResume, workflows.ResumeSignal{Seq: clock.UnixNano()}},
		{"c1", workflows.SignalStop, workflows.StopSignal{}},
		{"c1", workflows.SignalRestart, workflows.RestartSignal{Fetcher: 2}},
	}, fake.signals)

	fake.add("old", workflows.Status{}, Execution{Status: StatusCompleted, State: campaign.StateCompleted})
	code, _, errOut := run(t, fake, nil, "pause", "old")
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errOut, "campaign old has ended (completed)")
}

func TestScale(t *testing.T) {
	fake := newFake()
	fake.add("c1", workflows.Status{}, Execution{Status: StatusRunning})
	code, _, errOut := run(t, fake, nil, "scale", "c1", "6")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, []any{workflows.ScaleRequest{Fetchers: 6}}, fake.updates)

	fake.updateErr = &UpdateRejectedError{Message: "fetchers 5000: must be between 0 and 1024"}
	code, out, errOut := run(t, fake, nil, "scale", "c1", "5000")
	assert.Equal(t, ExitFailure, code)
	assert.Empty(t, out)
	assert.Equal(t, "scale rejected: fetchers 5000: must be between 0 and 1024\n", errOut)
}

func TestList(t *testing.T) {
	fake := newFake()
	fake.add("c1", workflows.Status{}, Execution{Status: StatusRunning, State: "paused", PagesFetched: 5, StartTime: time.Now()})
	code, out, errOut := run(t, fake, nil, "list", "--json")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "WorkflowType = '"+workflows.WorkflowName+"'", fake.listQuery)
	var entries []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &entries), out)
	require.Len(t, entries, 1)
	assert.Equal(t, "c1", entries[0]["id"])
	assert.Equal(t, "paused", entries[0]["state"])
	assert.Equal(t, 5.0, entries[0]["pages_fetched"])

	code, out, _ = run(t, fake, nil, "list")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "ID")
	assert.Regexp(t, `c1\s+paused\s+5\s+`, out)
}

func TestDecodeCounters(t *testing.T) {
	want := workflows.SessionCounters{Index: 3, Worker: "w", Fetched: 12, Errors: 2}
	p, err := converter.GetDefaultDataConverter().ToPayloads(want)
	require.NoError(t, err)
	assert.Equal(t, &want, decodeCounters(p))
	assert.Nil(t, decodeCounters(nil))
	junk, err := converter.GetDefaultDataConverter().ToPayloads("not counters")
	require.NoError(t, err)
	assert.Nil(t, decodeCounters(junk))
	assert.Nil(t, decodeCounters(&commonpb.Payloads{}))
}

// TestStopReleasesTerminated: Terminate runs no workflow code, so `stop` on
// a terminated campaign removes its queues from the frontier instead; so
// does `stop` on a completed one whose Close failed.
func TestStopReleasesTerminated(t *testing.T) {
	fake := newFake()
	fake.add("gone", workflows.Status{}, Execution{Status: StatusTerminated})
	fake.add("done", workflows.Status{}, Execution{Status: StatusCompleted, State: campaign.StateCompleted})
	var released []string
	var out, errb bytes.Buffer
	app := &App{Out: &out, Err: &errb, Now: func() time.Time { return clock },
		Dial: func(context.Context, Env) (Campaigns, error) { return fake, nil },
		Release: func(_ context.Context, addrs []string, token, id string) error {
			released = append(released, id)
			return nil
		}}
	require.Equal(t, ExitOK, app.Run(context.Background(), []string{"stop", "gone"}), errb.String())
	assert.Contains(t, out.String(), "campaign gone had ended (Terminated) without closing; its queues are removed")
	assert.Equal(t, ExitFailure, app.Run(context.Background(), []string{"stop", "done"}), "a completed campaign closed itself")
	// A completed campaign whose Close missed a scheduler left its queues
	// there, under its run's frontier key.
	fake.add("half", workflows.Status{CloseError: "scheduler 127.0.0.1:9 unreachable"},
		Execution{Status: StatusCompleted, State: campaign.StateCompleted, Frontier: "half~0mxb"})
	require.Equal(t, ExitOK, app.Run(context.Background(), []string{"stop", "half"}), errb.String())
	assert.Contains(t, out.String(), "campaign half had ended (Completed) with a close that failed (scheduler 127.0.0.1:9 unreachable); its queues are removed")
	assert.Equal(t, []string{"gone", "half~0mxb"}, released)
}

// TestStopWaitsUntilStopped: stop returns once the workflow has closed, so
// that `stop X && start --id X` works; the fake closes on its third look.
func TestStopWaitsUntilStopped(t *testing.T) {
	fake := newFake()
	r := fake.add("c1", workflows.Status{}, Execution{Status: StatusRunning}, Execution{Status: StatusRunning},
		Execution{Status: StatusRunning}, Execution{Status: StatusCompleted, State: campaign.StateStopped, PagesFetched: 23})
	code, out, errOut := run(t, fake, nil, "stop", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "campaign c1 stopped (23 pages fetched), ")
	assert.Equal(t, []sentSignal{{"c1", workflows.SignalStop, workflows.StopSignal{}}}, fake.signals)
	assert.GreaterOrEqual(t, r.n, 4, "returned before the workflow closed")

	code, _, errOut = run(t, fake, nil, "start", "--id", "c1", "--seed", "https://a.example/")
	assert.Equal(t, ExitOK, code, "start after stop: %s", errOut)
}

func TestStopTimeout(t *testing.T) {
	fake := newFake()
	fake.add("c1", workflows.Status{}, Execution{Status: StatusRunning})
	code, out, errOut := run(t, fake, nil, "stop", "c1", "--timeout", "50ms")
	assert.Equal(t, ExitFailure, code)
	assert.Empty(t, out)
	assert.Equal(t, "campaign c1 has the stop signal but has not stopped within 50ms; is a worker running on task queue "+
		workflows.TaskQueue+"? `starter status c1` shows what it is doing, and it stops once a worker runs it\n", errOut)

	code, _, errOut = run(t, fake, nil, "stop", "c1", "--timeout", "0s")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "--timeout 0s: must be more than 0")
}

func TestStopNoWait(t *testing.T) {
	fake := newFake()
	r := fake.add("c1", workflows.Status{}, Execution{Status: StatusRunning})
	code, out, errOut := run(t, fake, nil, "stop", "c1", "--no-wait")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "sent stop to campaign c1\n", out)
	assert.Len(t, fake.signals, 1)
	assert.Zero(t, r.n, "--no-wait looked at the campaign")
}

// A continuous campaign's revisit rules come from -f as YAML and from
// --revisit, whose list replaces the file's; a bad rule is a usage error.
func TestStartRevisitRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "campaign.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
id: news
seeds: [https://news.example/]
revisit:
  - {depth: 0, min: 2m, max: 10m}
  - {match: '/live/', min: 5m, max: 1h, factor: 1.5}
  - {mime: text/html, min: 1h, max: 168h}
`), 0o600))
	fake := newFake()
	code, _, errOut := run(t, fake, nil, "start", "-f", path)
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, []campaign.RevisitRule{
		{Depth: new(0), Min: 2 * time.Minute, Max: 10 * time.Minute},
		{Match: "/live/", Min: 5 * time.Minute, Max: time.Hour, Factor: 1.5},
		{MIME: "text/html", Min: time.Hour, Max: 168 * time.Hour},
	}, startedConfig(t, fake).Revisit)

	fake = newFake()
	code, _, errOut = run(t, fake, nil, "start", "-f", path, "--revisit", "min=10m,max=7d,factor=4")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, []campaign.RevisitRule{{Min: 10 * time.Minute, Max: 7 * 24 * time.Hour, Factor: 4}}, startedConfig(t, fake).Revisit)

	fake = newFake()
	code, _, errOut = run(t, fake, nil, "start", "--id", "c", "--seed", "https://a/", "--revisit", "max=1h")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, "--revisit: revisit \"max=1h\": min is required")
	assert.Empty(t, fake.started)
}

// A continuous campaign's status shows its schedule: how many URLs wait,
// when the first is due, how many were released.
func TestStatusShowsTheRevisitSchedule(t *testing.T) {
	fake := newFake()
	fake.add("news", workflows.Status{State: campaign.StateRunning, FetchersDesired: 1},
		Execution{Status: StatusRunning, StartTime: clock.Add(-time.Hour)})
	next := clock.Add(3*time.Minute + 12*time.Second)
	stats := func(context.Context, []string, string, string) (session.Stats, error) {
		return session.Stats{Continuous: true, Scheduled: 1043, NextDue: next, Revisited: 8211, ReleaseErrors: 2, Schedulers: []string{"s0"}}, nil
	}
	code, out, errOut := run(t, fake, stats, "status", "news")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "revisits  1043 scheduled, next due "+next.Local().Format(time.DateTime)+" (in 3m12s), 8211 released to be fetched again; 2 releases failed")

	code, out, _ = run(t, fake, func(context.Context, []string, string, string) (session.Stats, error) {
		return session.Stats{Schedulers: []string{"s0"}}, nil
	}, "status", "news")
	require.Equal(t, ExitOK, code)
	assert.NotContains(t, out, "revisits", "a campaign that is not continuous has no schedule")
}

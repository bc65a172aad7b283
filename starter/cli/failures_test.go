package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/workflows"
)

// deps are the App's dependencies of one test run; nil ones stay unset.
type deps struct {
	schedulers []string
	temporal   Campaigns
	stats      StatsFunc
	failures   FailuresFunc
	drop       DropFailuresFunc
}

// runCLI runs the starter on args with d, and returns its exit code,
// stdout and stderr.
func runCLI(t *testing.T, d deps, args ...string) (int, string, string) {
	t.Helper()
	return runApp(t, &App{
		Env: Env{Env: envconf.Env{Schedulers: d.schedulers}},
		Dial: func(context.Context, Env) (Campaigns, error) {
			if d.temporal == nil {
				return nil, errors.New("no Temporal in this test")
			}
			return d.temporal, nil
		},
		Stats: d.stats, Failures: d.failures, DropFailures: d.drop,
	}, args...)
}

// The URLs of the failing campaign: a live host whose robots.txt disallows
// /private and whose /missing answers 404, a host that refuses connections
// and a host name that does not resolve.
const (
	liveRoot    = "http://127.77.0.1:9/"
	liveMissing = "http://127.77.0.1:9/missing"
	livePrivate = "http://127.77.0.1:9/private/x"
	refusedA    = "http://127.77.0.2:9/a"
	refusedB    = "http://127.77.0.2:9/b"
	noSuchHost  = "http://gone.invalid/"
)

// wantReasons is every failure of the campaign and its reason.
var wantReasons = map[string]string{
	liveMissing: "4xx",
	livePrivate: "robots",
	refusedA:    "refused",
	refusedB:    "refused",
	noSuchHost:  "dns",
}

// startScheduler serves a scheduler over AMQP_URL's RabbitMQ with an
// in-memory seen store (which keeps failure records) on a free port.
func startScheduler(t *testing.T) string {
	t.Helper()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	return nodetest.StartScheduler(t, node.SchedulerConfig{Log: log}).Addr()
}

// failingCampaign seeds a campaign on the scheduler at addr and plays its
// fetcher over a real session until every URL is settled: two pages
// fetched, and the five failures of wantReasons recorded. It returns the
// campaign's ID; its queues are removed at the end of the test.
func failingCampaign(t *testing.T, addr string) string {
	t.Helper()
	id := fmt.Sprintf("cli-failures-%d", rand.IntN(1e9))
	// Decoded from JSON, the form the workflow gets it in: a host failed
	// at its first refused connection (host_retries 0), 1 ms between
	// requests.
	var cfg campaign.Config
	require.NoError(t, json.Unmarshal([]byte(fmt.Sprintf(`{"id": %q, "seeds": [%q, %q, %q, %q, %q, %q],
		"per_host_delay": 1000000, "host_retries": 0, "allow_private": true, "sinks": ["warc:/unused"]}`,
		id, liveRoot, liveMissing, livePrivate, refusedA, refusedB, noSuchHost)), &cfg))
	cfg = cfg.WithDefaults()
	require.NoError(t, cfg.Validate())

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ctl, err := session.Client{Token: session.DevToken}.DialControl(ctx, addr)
	require.NoError(t, err)
	t.Cleanup(func() { ctl.Close() })
	n, err := ctl.Seed(ctx, cfg, cfg.Seeds)
	require.NoError(t, err)
	require.Equal(t, len(cfg.Seeds), n)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := ctl.CloseCampaign(ctx, id, true); err != nil {
			t.Logf("close campaign %s: %v", id, err)
		}
	})

	sess, err := session.Client{Token: session.DevToken}.DialSession(ctx, addr, "cli-test", cfg, 8)
	require.NoError(t, err)
	defer sess.Close()
	var mu sync.Mutex
	var unexpected []string
	go func() {
		sess.Credit(8)
		for l := range sess.Leases() {
			o, ok := answer(l)
			if !ok {
				mu.Lock()
				unexpected = append(unexpected, l.URL)
				mu.Unlock()
				o = session.Outcome{LeaseID: l.ID, Released: true}
			}
			sess.Report(o)
			sess.Credit(1)
		}
	}()

	var st session.Stats
	await.For(t, 30*time.Second, 50*time.Millisecond, "campaign "+id+" settled", func() error {
		st, err = ctl.Stats(ctx, id)
		if err == nil && !(st.Idle() && st.Fetched == 2 && sum(st.FailedBy) == int64(len(wantReasons))) {
			err = fmt.Errorf("stats %+v", st)
		}
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, unexpected, "leased URLs that should have failed without a fetch")
	return id
}

// answer is the fetcher's outcome of lease l, as package fetch would
// report it; false for a lease that should not have come.
func answer(l session.Lease) (session.Outcome, bool) {
	u, _ := url.Parse(l.URL)
	o := session.Outcome{LeaseID: l.ID}
	switch {
	case l.Kind == session.KindRobots && u.Host == "127.77.0.1:9":
		o.Robots = &session.RobotsBody{Status: 200, Body: []byte("User-agent: *\nDisallow: /private\n")}
	case l.Kind == session.KindRobots && u.Host == "127.77.0.2:9":
		o.Error = "dial tcp 127.77.0.2:9: connect: connection refused"
		o.Robots = &session.RobotsBody{Error: o.Error}
		o.Reason, o.HostDown = "refused", true
	case l.Kind == session.KindRobots && u.Host == "gone.invalid":
		o.Error = "dial tcp: lookup gone.invalid: no such host"
		o.Robots = &session.RobotsBody{Error: o.Error}
		o.Reason, o.HostDown = "dns", true
	case l.URL == liveRoot:
		o.Stored, o.Status = true, 200
	case l.URL == liveMissing:
		o.Stored, o.Status, o.Error = true, 404, "404 Not Found"
	default:
		return o, false
	}
	return o, true
}

// lineOf returns the one line of out that holds s.
func lineOf(t *testing.T, out, s string) string {
	t.Helper()
	var found []string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) {
			found = append(found, line)
		}
	}
	require.Len(t, found, 1, "lines with %q in:\n%s", s, out)
	return found[0]
}

// A campaign's failures, produced by a real scheduler from a fetcher's
// reports, listed by `starter failures` (text, --json, --reason), counted
// by `starter status` while it runs and after it ended, and dropped by
// --clear.
func TestFailuresFromScheduler(t *testing.T) {
	addr := startScheduler(t)
	id := failingCampaign(t, addr)
	d := deps{schedulers: []string{addr}, failures: sessiontest.Failures, drop: sessiontest.DropFailures, stats: sessiontest.CampaignStats}

	// Text: a header counting by reason, then one row per URL, by URL.
	code, out, errOut := runCLI(t, d, "failures", id)
	require.Equal(t, ExitOK, code, errOut)
	t.Logf("starter failures %s:\n%s", id, out)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 2+len(wantReasons), out)
	assert.Equal(t, fmt.Sprintf("campaign %s: 5 failures: 4xx 1, dns 1, refused 2, robots 1", id), lines[0])
	assert.Equal(t, []string{"REASON", "ATTEMPTS", "FIRST", "LAST", "URL", "LAST", "ERROR"}, strings.Fields(lines[1]))
	wantOrder := []string{liveMissing, livePrivate, refusedA, refusedB, noSuchHost} // by URL
	for i, u := range wantOrder {
		f := strings.Fields(lines[2+i])
		require.GreaterOrEqual(t, len(f), 7, lines[2+i])
		assert.Equal(t, wantReasons[u], f[0], lines[2+i])
		assert.Equal(t, u, f[6], "row %d is not %s: the rows are not by URL", i, u)
	}
	assert.Contains(t, lineOf(t, out, refusedA), "127.77.0.2 unreachable after 1 tries: dial tcp 127.77.0.2:9: connect: connection refused")
	assert.Contains(t, lineOf(t, out, noSuchHost), "no such host")
	assert.Contains(t, lineOf(t, out, livePrivate), "disallowed by robots.txt")
	assert.Contains(t, lineOf(t, out, liveMissing), "404 Not Found")
	assert.Equal(t, "1", strings.Fields(lineOf(t, out, liveMissing))[1], "attempts of the 404 page")

	// JSON: every record whole, and the total.
	code, out, errOut = runCLI(t, d, "failures", id, "--json")
	require.Equal(t, ExitOK, code, errOut)
	t.Logf("starter failures %s --json:\n%s", id, out)
	var list FailureList
	require.NoError(t, json.Unmarshal([]byte(out), &list), out)
	assert.Equal(t, id, list.ID)
	assert.Equal(t, len(wantReasons), list.Total)
	got := map[string]string{}
	var urls []string
	for _, f := range list.Failures {
		got[f.URL] = f.Reason
		urls = append(urls, f.URL)
		assert.False(t, f.First.IsZero() || f.Last.Before(f.First), "times of %+v", f)
		assert.NotEmpty(t, f.LastError, "last error of %s", f.URL)
	}
	assert.Equal(t, wantReasons, got)
	assert.Equal(t, wantOrder, urls)

	// --reason filters, whatever its case.
	code, out, errOut = runCLI(t, d, "failures", id, "--reason", "REFUSED")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("campaign %s: 2 failures with reason refused", id), strings.Split(out, "\n")[0])
	assert.Contains(t, out, refusedA)
	assert.Contains(t, out, refusedB)
	assert.NotContains(t, out, liveMissing)
	assert.NotContains(t, out, noSuchHost)
	code, out, errOut = runCLI(t, d, "failures", id, "--reason", "5xx")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("no failure records with reason 5xx for campaign %s on %s\n", id, addr), out)

	// status while it runs: the schedulers' counts by reason, hosts down.
	start := time.Now().Add(-time.Minute)
	running := newFake()
	running.add(id, workflows.Status{State: campaign.StateRunning, FetchersDesired: 1, FetchersActive: 1, StartedAt: start},
		Execution{Status: StatusRunning, StartTime: start})
	d.temporal = running
	code, out, errOut = runCLI(t, d, "status", id)
	require.Equal(t, ExitOK, code, errOut)
	t.Logf("starter status %s:\n%s", id, out)
	assert.Contains(t, out, fmt.Sprintf("  failed    5: 4xx 1, dns 1, refused 2, robots 1 (starter failures %s lists them)\n", id))
	assert.Contains(t, out, "  hosts     2 down: ")
	assert.Contains(t, out, "  pages     2 fetched, ")
	assert.NotContains(t, out, "QUEUES")

	code, out, errOut = runCLI(t, d, "status", id, "--json")
	require.Equal(t, ExitOK, code, errOut)
	t.Logf("starter status %s --json:\n%s", id, out)
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &js), out)
	for _, k := range []string{"id", "state", "fetchers_desired", "fetchers_active", "pages_fetched", "pages_failed", "urls_queued", "urls_in_flight"} {
		assert.Contains(t, js, k, "status --json lost a field scripts read")
	}
	assert.Equal(t, map[string]any{"4xx": 1.0, "dns": 1.0, "refused": 2.0, "robots": 1.0}, js["failed_by"])
	assert.Equal(t, 2.0, js["hosts_down"])
	assert.NotContains(t, js, "consume_error")

	// status once it ended: the schedulers forgot its counts, its failure
	// records remain and are counted.
	ended := newFake()
	end := time.Now()
	ended.add(id, workflows.Status{State: campaign.StateCompleted, PagesFetched: 2, StartedAt: start},
		Execution{Status: StatusCompleted, StartTime: start, CloseTime: end})
	d.temporal = ended
	code, out, errOut = runCLI(t, d, "status", id, "--json")
	require.Equal(t, ExitOK, code, errOut)
	var v View
	require.NoError(t, json.Unmarshal([]byte(out), &v), out)
	assert.Equal(t, map[string]int64{"4xx": 1, "dns": 1, "refused": 2, "robots": 1}, v.FailedBy)
	assert.Nil(t, v.HostsDown, "hosts down of an ended campaign are unknown")

	// --clear drops them on every scheduler, and only then are they gone.
	code, out, errOut = runCLI(t, d, "failures", id, "--clear")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("dropped the failure records of campaign %s on %s\n", id, addr), out)
	code, out, errOut = runCLI(t, d, "failures", id)
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("no failure records for campaign %s on %s\n", id, addr), out)
	code, out, errOut = runCLI(t, d, "failures", id, "--json")
	require.Equal(t, ExitOK, code, errOut)
	assert.JSONEq(t, fmt.Sprintf(`{"id": %q, "total": 0, "failures": []}`, id), out)
}

func TestFailuresUsage(t *testing.T) {
	called := false
	d := deps{
		failures: func(context.Context, []string, string, string, string) ([]failure.Record, int, error) {
			called = true
			return nil, 0, nil
		},
		drop: func(context.Context, []string, string, string) error { called = true; return nil },
	}
	for _, args := range [][]string{
		{"failures"},
		{"failures", "c1", "c2"},
		{"failures", "c1", "--clear", "--reason", "dns"},
		{"failures", "c1", "--reason", "two words"},
		{"failures", "c1", "--nonsense"},
	} {
		called = false
		code, out, errOut := runCLI(t, d, args...)
		assert.Equal(t, ExitUsage, code, "%v: %s", args, errOut)
		assert.Contains(t, errOut, "Run 'starter failures --help' for usage.", args)
		assert.Empty(t, out, args)
		assert.False(t, called, "%v reached the schedulers", args)
	}
}

func TestFailuresHelpSaysHowRecordsGo(t *testing.T) {
	code, out, _ := runCLI(t, deps{}, "failures", "--help")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "removed only by a new\nrun of the same campaign ID or by --clear")
	assert.Contains(t, out, "--reason")
}

// A scheduler that does not answer is one clear line and exit 1, for the
// list and for --clear.
func TestFailuresSchedulerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	d := deps{schedulers: []string{addr}, failures: sessiontest.Failures, drop: sessiontest.DropFailures}
	for _, args := range [][]string{{"failures", "c1"}, {"failures", "c1", "--json"}, {"failures", "c1", "--clear"}} {
		code, out, errOut := runCLI(t, d, args...)
		assert.Equal(t, ExitFailure, code, args)
		assert.Empty(t, out, args)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "%v: %q", args, errOut)
		assert.Contains(t, errOut, "campaign c1", args)
		assert.Contains(t, errOut, "scheduler "+addr+" unreachable", args)
	}
}

// A list the schedulers cut says so, and an error too long for the line is
// trimmed in the table and whole in the JSON.
func TestFailuresCutAndTrimmed(t *testing.T) {
	long := "tls: failed to verify certificate: " + strings.Repeat("x509: certificate signed by unknown authority; ", 10)
	at := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	recs := []failure.Record{
		{URL: "https://a.example/", Reason: "tls", Attempts: 3, LastError: long, First: at, Last: at.Add(time.Minute)},
		{URL: "https://b.example/x", Reason: "5xx", Attempts: 3, LastError: "retryable status: 503 Service Unavailable", First: at, Last: at},
	}
	d := deps{failures: func(_ context.Context, _ []string, _, _, reason string) ([]failure.Record, int, error) {
		return recs, 60_000, nil
	}}
	code, out, errOut := runCLI(t, d, "failures", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, fmt.Sprintf("campaign c1: 2 of 60000 failures listed (each scheduler sends at most %d; --reason narrows the list): 5xx 1, tls 1",
		session.MaxFailuresReply), strings.Split(out, "\n")[0])
	row := lineOf(t, out, "https://a.example/")
	assert.LessOrEqual(t, utf8.RuneCountInString(row), tableWidth, row)
	assert.True(t, strings.HasSuffix(row, "…"), row)
	assert.Contains(t, row, "tls: failed to verify certificate: x509")
	assert.Contains(t, lineOf(t, out, "https://b.example/x"), "retryable status: 503 Service Unavailable")

	code, out, errOut = runCLI(t, d, "failures", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var list FailureList
	require.NoError(t, json.Unmarshal([]byte(out), &list))
	assert.Equal(t, 60_000, list.Total)
	require.Len(t, list.Failures, 2)
	assert.Equal(t, long, list.Failures[0].LastError)
}

// status names a scheduler that cannot consume the campaign's queues, and
// tells "no failures" ({} and 0) from "unknown" (null).
func TestStatusConsumeErrorAndUnknownCounts(t *testing.T) {
	start := clock.Add(-time.Minute)
	fake := newFake()
	fake.add("c1", workflows.Status{State: campaign.StateRunning, FetchersDesired: 2, StartedAt: start},
		Execution{Status: StatusRunning, StartTime: start})
	const why = `consuming shard 3: Exception (406) Reason: "PRECONDITION_FAILED - unknown delivery tag 1099511627776"`
	d := deps{temporal: fake, stats: func(context.Context, []string, string, string) (session.Stats, error) {
		return session.Stats{ConsumeError: why}, nil
	}}
	code, out, errOut := runCLI(t, d, "status", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "  QUEUES    a scheduler cannot consume the campaign's queues (it keeps trying): "+why+"\n")
	assert.NotContains(t, out, "  failed  ")
	assert.NotContains(t, out, "  hosts  ")

	code, out, errOut = runCLI(t, d, "status", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &js), out)
	assert.Equal(t, why, js["consume_error"])
	assert.Equal(t, map[string]any{}, js["failed_by"])
	assert.Equal(t, 0.0, js["hosts_down"])

	d.stats = refusedStats
	code, out, errOut = runCLI(t, d, "status", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	js = nil
	require.NoError(t, json.Unmarshal([]byte(out), &js), out)
	require.Contains(t, js, "failed_by")
	require.Contains(t, js, "hosts_down")
	assert.Nil(t, js["failed_by"])
	assert.Nil(t, js["hosts_down"])
}

// No records is an empty array for scripts, not null, whatever the
// scheduler client returned.
func TestFailuresJSONEmptyIsArray(t *testing.T) {
	d := deps{failures: func(context.Context, []string, string, string, string) ([]failure.Record, int, error) {
		return nil, 0, nil
	}}
	code, out, errOut := runCLI(t, d, "failures", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	assert.JSONEq(t, `{"id": "c1", "total": 0, "failures": []}`, out)
}

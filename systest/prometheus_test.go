package systest_test

// A real Prometheus (Debian's `prometheus`) scrapes a worker's
// and a scheduler's /metrics during a crawl of the test web; its HTTP API
// then shows the crawl's rate while it runs and, once it is over, totals
// equal to what the test web's server counted. `promtool check metrics`
// passes on both endpoints, and every expression of the Grafana dashboard
// (deploy/grafana/drover.json) is accepted by Prometheus and names only
// metrics the endpoints serve.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/metrics"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// prometheusBins finds Debian's prometheus and promtool. Without them the
// test fails in CI (.ci/run installs them) and is skipped elsewhere.
func prometheusBins(t *testing.T) (prom, promtool string) {
	t.Helper()
	testenv.NeedsTool(t, "prometheus")
	prom, err1 := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err1 != nil || err2 != nil {
		msg := "no prometheus or promtool on PATH (apt-get install prometheus; .ci/run installs it)"
		if os.Getenv("CI") != "" {
			require.FailNow(t, msg)
		}
		t.Skip(msg)
	}
	return prom, promtool
}

// promServer is a Prometheus process scraping the test's endpoints.
type promServer struct {
	url string
}

// startPrometheus runs prometheus with a config scraping each job's
// target every 500 ms, and returns once it is ready.
func startPrometheus(t *testing.T, bin string, jobs map[string]string) *promServer {
	t.Helper()
	dir := t.TempDir()
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 500ms\n  scrape_timeout: 500ms\n  evaluation_interval: 1s\nscrape_configs:\n")
	for _, job := range slices.Sorted(mapsKeys(jobs)) {
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs:\n      - targets: [%q]\n", job, jobs[job])
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg.String()), 0o644))
	addr := freeAddr(t)
	proc := startProc(t, "prometheus", bin, []string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn"}, nil)
	p := &promServer{url: "http://" + addr}
	await.For(t, 30*time.Second, 100*time.Millisecond, "prometheus ready on "+addr, func() error {
		checkRunning(t, proc)
		return devstack.CheckHTTP(context.Background(), p.url+"/-/ready")
	})
	return p
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// promSample is one element of an instant vector.
type promSample struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
}

func (s promSample) value(t *testing.T) float64 {
	str, _ := s.Value[1].(string)
	v, err := strconv.ParseFloat(str, 64)
	require.NoError(t, err, "sample %v", s)
	return v
}

// query runs an instant query; err is Prometheus's error (a parse error
// for bad PromQL) or a transport error.
func (p *promServer) query(q string) ([]promSample, error) {
	resp, err := http.PostForm(p.url+"/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r struct {
		Status    string `json:"status"`
		ErrorType string `json:"errorType"`
		Error     string `json:"error"`
		Data      struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("query %q: HTTP %s: %w", q, resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: %s", q, r.ErrorType, r.Error)
	}
	if r.Data.ResultType != "vector" {
		return nil, nil // a scalar (a constant expression): no samples to read
	}
	var out []promSample
	if err := json.Unmarshal(r.Data.Result, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// scalar is the one value of q's result; ok is false when it is empty.
func (p *promServer) scalar(t *testing.T, q string) (v float64, ok bool) {
	t.Helper()
	res, err := p.query(q)
	require.NoError(t, err)
	if len(res) == 0 {
		return 0, false
	}
	require.LessOrEqual(t, len(res), 1, "query %q: samples, want one: %v", q, res)
	return res[0].value(t), true
}

func scrape(t *testing.T, u string) []byte {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "GET %s: %s", u, resp.Status)
	require.Equal(t, http.StatusOK, resp.StatusCode, "GET %s: %s", u, resp.Status)
	return b
}

// promtoolCheck runs `promtool check metrics` on an endpoint's text.
func promtoolCheck(t *testing.T, promtool, name string, body []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(body)
	out, err := cmd.CombinedOutput()
	assert.NoError(t, err, "promtool check metrics on the %s's endpoint:\n%s", name, out)
}

// metricNames are the metric names of an exposition (histograms' _bucket,
// _sum and _count included, as PromQL names them).
func metricNames(body []byte) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// crawlWithin bounds TestPrometheusScrapesACrawl's campaign (about 10 s on
// an idle machine), and with it the waits for what Prometheus shows
// during the crawl.
const crawlWithin = 4 * time.Minute

func TestPrometheusScrapesACrawl(t *testing.T) {
	promBin, promtool := prometheusBins(t)
	web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 200, CrossHost: true, Base: 57})

	ctx := context.Background()
	sv := startServices(t)
	tmp, k, topic := sv.temporal, sv.kafka, sv.topic
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The scheduler and the worker, each with a registry and an endpoint
	// of its own, as the two processes have.
	sreg, wreg := metrics.NewRegistry(), metrics.NewRegistry()
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{SeenPath: filepath.Join(t.TempDir(), "seen"), Log: log, Metrics: sreg})
	wm, err := activities.NewWorkerMetrics(wreg, log)
	require.NoError(t, err)
	wc, err := client.Dial(client.Options{HostPort: tmp.Address(), Namespace: tmp.Namespace(), MetricsHandler: wm.Temporal})
	require.NoError(t, err)
	t.Cleanup(func() { wc.Close(); wm.Close() })
	acts := &activities.Activities{Schedulers: []string{sched.Addr()}, Token: session.DevToken, KafkaBrokers: k.Addr(), Identity: "prom-worker"}
	wm.Instrument(acts)
	w, err := temporalnode.StartWorkers(wc, temporalnode.WorkerConfig{Activities: acts})
	require.NoError(t, err)
	t.Cleanup(w.Stop)
	sm, err := metrics.Serve("127.0.0.1:0", sreg)
	require.NoError(t, err)
	t.Cleanup(func() { sm.Close() })
	wms, err := metrics.Serve("127.0.0.1:0", wreg)
	require.NoError(t, err)
	t.Cleanup(func() { wms.Close() })
	// The job names of deploy/compose/prometheus.yml.
	prom := startPrometheus(t, promBin, map[string]string{"drover-worker": wms.Addr(), "drover-scheduler": sm.Addr()})

	// 4 hosts of 200 pages, 50 ms apart per host: about 10 s of crawl on
	// an idle machine; and a seed whose host refuses connections, which is
	// dead-lettered at its first failure.
	refused := "http://" + freeAddr(t) + "/"
	cfg := campaign.Config{
		ID: fmt.Sprintf("prom-%d", rand.IntN(1e9)), Seeds: append(web.Seeds(), refused), Fetchers: 2,
		PerHostDelay: new(50 * time.Millisecond), AllowPrivate: true, HostRetries: new(0),
		Sinks: []string{"kafka://" + k.Addr() + "/" + topic},
	}
	run, err := tmp.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	require.NoError(t, err)
	done := make(chan struct{})
	var st workflows.Status
	var runErr error
	go func() {
		defer close(done)
		rctx, cancel := context.WithTimeout(ctx, crawlWithin)
		defer cancel()
		runErr = run.Get(rctx, &st)
	}()
	running := func() bool {
		select {
		case <-done:
			return false
		default:
			return len(web.Missing()) > 0
		}
	}
	id := strconv.Quote(cfg.ID)

	// During the crawl: the rate of pages is positive, the scheduler shows
	// the campaign's queues, sessions and leases.
	rateQ := `rate(drover_pages_fetched_total{campaign=` + id + `}[15s]) > 0`
	var rate []promSample
	err = await.Until(ctx, crawlWithin, 200*time.Millisecond, func() error {
		if !running() {
			return fmt.Errorf("%w: the crawl ended (%d requests)", await.ErrFinal, web.Total())
		}
		rate, err = prom.query(rateQ)
		require.NoError(t, err)
		if len(rate) == 0 {
			return errors.New("no positive rate yet")
		}
		return nil
	})
	require.NoError(t, err, "the crawl ended (%d requests) before Prometheus saw a positive rate of pages", web.Total())
	require.True(t, running(), "the crawl ended (%d requests) before Prometheus saw a positive rate of pages", web.Total())
	var shown []string
	for _, s := range rate {
		shown = append(shown, fmt.Sprintf("%v = %.1f pages/s", s.Metric, s.value(t)))
	}
	t.Logf("during the crawl (%d of %d pages requested), %s:\n  %s", web.Total(), len(web.Pages()), rateQ, strings.Join(shown, "\n  "))

	var sbody, wbody []byte
	duringChecks := map[string]func(v float64) bool{
		`count(drover_scheduler_queue_depth{campaign=` + id + `})`:                 func(v float64) bool { return v == frontier.Shards+4 },
		`drover_scheduler_sessions{campaign=` + id + `}`:                           func(v float64) bool { return v == float64(cfg.Fetchers) },
		`sum(drover_fetch_sessions{campaign=` + id + `})`:                          func(v float64) bool { return v == float64(cfg.Fetchers) },
		`sum(drover_scheduler_leases_granted_total{campaign=` + id + `})`:          func(v float64) bool { return v > 0 },
		`sum(drover_scheduler_politeness_wait_seconds_count{campaign=` + id + `})`: func(v float64) bool { return v > 0 },
		`sum(drover_sink_store_duration_seconds_count{campaign=` + id + `})`:       func(v float64) bool { return v > 0 },
		`sum(drover_scheduler_publish_confirm_seconds_count)`:                      func(v float64) bool { return v > 0 },
		`sum(temporal_workflow_task_execution_latency_seconds_count)`:              func(v float64) bool { return v > 0 },
		`drover_scheduler_seen_store_bytes`:                                        func(v float64) bool { return v > 0 },
		// The worker leaves out links recorded before (a page's navigation).
		`sum(drover_scheduler_links_known_total{campaign=` + id + `})`: func(v float64) bool { return v > 0 },
		// The refused seed, its one URL.
		`sum(drover_scheduler_dead_lettered_total{campaign=` + id + `, reason="refused"})`: func(v float64) bool { return v == 1 },
		`sum(drover_scheduler_failures_total{campaign=` + id + `, reason="refused"})`:      func(v float64) bool { return v == 1 },
		`sum(drover_scheduler_leases_expired_total{campaign=` + id + `})`:                  func(v float64) bool { return v == 0 },
	}
	var pending []string
	for q := range duringChecks {
		pending = append(pending, q)
	}
	_ = await.Until(ctx, crawlWithin, 200*time.Millisecond, func() error {
		if !running() {
			return await.ErrFinal
		}
		var still []string
		for _, q := range pending {
			if v, ok := prom.scalar(t, q); !ok || !duringChecks[q](v) {
				still = append(still, q)
			}
		}
		if pending = still; len(pending) > 0 {
			return fmt.Errorf("pending %v", pending)
		}
		return nil
	})
	assert.Empty(t, pending, "the crawl ended before these held in Prometheus")
	// Both endpoints mid-crawl: promtool accepts them; kept for the record.
	sbody, wbody = scrape(t, sm.URL()), scrape(t, wms.URL())
	assert.True(t, running(), "the crawl ended before the endpoints were read mid-crawl")
	promtoolCheck(t, promtool, "scheduler", sbody)
	promtoolCheck(t, promtool, "worker", wbody)
	saveArtifacts(t, map[string][]byte{"scheduler.txt": sbody, "worker.txt": wbody})

	<-done
	require.NoError(t, runErr, "campaign")
	require.Equal(t, campaign.StateCompleted, st.State, "campaign state (%s)", st.Reason)
	if m := web.Missing(); len(m) > 0 {
		require.FailNowf(t, "pages never requested", "%d pages never requested", len(m))
	}

	// After the crawl: Prometheus's totals equal the server's counts.
	var pageReqs, robotsReqs, bodyBytes, notFound int
	for _, r := range web.Requests() {
		u, err := url.Parse(r.URL)
		require.NoError(t, err)
		if u.Path == "/robots.txt" {
			robotsReqs++
			continue
		}
		pageReqs++
		if r.Status >= 400 && r.Status < 500 {
			notFound++
		}
		b, ok := web.Body(r.URL)
		require.True(t, ok, "the test web cannot say what it sent for %s", r.URL)
		bodyBytes += len(b)
	}
	require.NotZero(t, notFound, "the test web answered no 4xx: the errors by class are not tested")
	totals := []struct {
		q    string
		want int
	}{
		{`sum(drover_pages_fetched_total{campaign=` + id + `})`, pageReqs},
		{`sum(drover_fetch_duration_seconds_count{campaign=` + id + `})`, pageReqs},
		{`sum(drover_fetch_bytes_total{campaign=` + id + `})`, bodyBytes},
		{`sum(drover_fetch_failures_total{campaign=` + id + `, reason="4xx"})`, notFound},
		{`sum(drover_pages_fetched_total{campaign=` + id + `, class="4xx"})`, notFound},
		{`sum(drover_robots_fetches_total{campaign=` + id + `, class!="error"})`, robotsReqs},
		{`sum(drover_robots_fetches_total{campaign=` + id + `, class="error"})`, 1}, // the refused host's
		{`sum(drover_sink_store_duration_seconds_count{campaign=` + id + `, sink="kafka"})`, pageReqs},
	}
	for _, tc := range totals {
		var got float64
		var ok bool
		_ = await.Until(ctx, 15*time.Second, 200*time.Millisecond, func() error {
			if got, ok = prom.scalar(t, tc.q); !ok || got != float64(tc.want) {
				return errors.New("not yet")
			}
			return nil
		})
		if assert.True(t, ok, "%s: not present; the test web counted %d", tc.q, tc.want) &&
			assert.Equal(t, float64(tc.want), got, "%s, against what the test web counted", tc.q) {
			t.Logf("%s = %v, as the test web counted", tc.q, got)
		}
	}
	if v, ok := prom.scalar(t, `sum(drover_sink_store_errors_total{campaign=`+id+`})`); ok {
		assert.Zero(t, v, "sink store errors, want none")
	}

	// The dashboard, against this Prometheus and these endpoints.
	names := metricNames(sbody)
	for n := range metricNames(wbody) {
		names[n] = true
	}
	for n := range metricNames(scrape(t, wms.URL())) {
		names[n] = true
	}
	checkDashboard(t, prom, names)
}

// outDir makes and returns the folder out/name of the repository, where
// a test leaves what a person may want to look at afterwards.
func outDir(t *testing.T, name string) string {
	t.Helper()
	root, err := devstack.RepoRoot(".")
	require.NoError(t, err)
	dir := filepath.Join(root, "out", name)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	return dir
}

// saveArtifacts writes the endpoints' text under out/metrics/.
func saveArtifacts(t *testing.T, files map[string][]byte) {
	t.Helper()
	dir := outDir(t, "metrics")
	for name, b := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
	}
	t.Logf("the endpoints' text mid-crawl: %s", dir)
}

// grafanaDashboard is what the check reads of deploy/grafana/drover.json.
type grafanaDashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
	Templating struct {
		List []struct {
			Name       string `json:"name"`
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardPanels are the dashboard's panels, as titled in the JSON.
var dashboardPanels = []string{"Pages/s by campaign", "Errors by class", "Queue depth", "Fleet size",
	"Politeness wait (p50, p95)", "Sink store latency p95 by sink", "Temporal worker task latency p95"}

// checkDashboard: the dashboard has the panels the issue asks for; every
// expression, with Grafana's variables filled in, is accepted by the live
// Prometheus (a PromQL parse error fails); every metric name it uses is
// served by the endpoints (names).
func checkDashboard(t *testing.T, prom *promServer, names map[string]bool) {
	root, err := devstack.RepoRoot(".")
	require.NoError(t, err)
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "grafana", "drover.json"))
	require.NoError(t, err)
	var d grafanaDashboard
	require.NoError(t, json.Unmarshal(raw, &d), "deploy/grafana/drover.json")
	var titles []string
	for _, p := range d.Panels {
		titles = append(titles, p.Title)
	}
	for _, want := range dashboardPanels {
		assert.Contains(t, titles, want, "the dashboard has no panel %q; it has %q", want, titles)
	}
	fill := strings.NewReplacer("$__rate_interval", "15s", "$__interval", "15s", "$campaign", ".*")
	used := map[string]bool{}
	for _, p := range d.Panels {
		assert.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			_, err := prom.query(fill.Replace(tg.Expr))
			assert.NoError(t, err, "panel %q", p.Title)
			ns := promqlMetricNames(tg.Expr)
			assert.NotEmpty(t, ns, "panel %q: no metric name found in %q", p.Title, tg.Expr)
			for _, n := range ns {
				used[n] = true
				assert.True(t, names[n], "panel %q uses %s, which neither endpoint serves", p.Title, n)
			}
		}
	}
	for _, v := range d.Templating.List {
		m := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),\s*(\w+)\)$`).FindStringSubmatch(v.Definition)
		if !assert.NotNil(t, m, "variable %s: %q is not label_values(METRIC, LABEL)", v.Name, v.Definition) {
			continue
		}
		assert.True(t, names[m[1]], "variable %s uses %s, which neither endpoint serves", v.Name, m[1])
	}
	if !t.Failed() {
		t.Logf("dashboard: %d panels, every expression accepted by Prometheus, %d metric names all served: %s",
			len(d.Panels), len(used), strings.Join(titles, "; "))
	}
}

var (
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlBraces   = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlKeywords = map[string]bool{
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
		"sum": true, "avg": true, "min": true, "max": true, "count": true, "stddev": true, "stdvar": true,
		"topk": true, "bottomk": true, "quantile": true, "count_values": true, "group": true,
	}
)

// promqlMetricNames returns the metric names a PromQL expression selects:
// its identifiers that are not in strings, label matchers, ranges or
// grouping lists, not functions (followed by "(") and not keywords.
func promqlMetricNames(expr string) []string {
	e := promqlStrings.ReplaceAllString(expr, `""`)
	e = promqlGrouping.ReplaceAllString(e, " ")
	e = promqlBraces.ReplaceAllString(e, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(e, -1) {
		id := e[loc[0]:loc[1]]
		if loc[0] > 0 && (e[loc[0]-1] >= '0' && e[loc[0]-1] <= '9' || e[loc[0]-1] == '.') {
			continue // the tail of a number such as 1e3 or 0.5
		}
		if promqlKeywords[strings.ToLower(id)] {
			continue
		}
		if rest := strings.TrimLeft(e[loc[1]:], " \t\n"); strings.HasPrefix(rest, "(") {
			continue // a function
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

func TestPromQLMetricNames(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`drover_scheduler_seen_store_bytes`, []string{"drover_scheduler_seen_store_bytes"}},
		{`sum by (campaign) (rate(drover_pages_fetched_total{campaign=~"$campaign"}[$__rate_interval]))`, []string{"drover_pages_fetched_total"}},
		{`histogram_quantile(0.95, sum by (le, sink) (rate(drover_sink_store_duration_seconds_bucket{campaign=~"a|b"}[5m])))`, []string{"drover_sink_store_duration_seconds_bucket"}},
		{`sum(a_total) / ignoring(x) group_left (y) b_total > bool 1e3 unless on(z) c`, []string{"a_total", "b_total", "c"}},
		{`max by (campaign, queue) (q{queue=~"park.*", x="sum(y)"}) offset 5m`, []string{"q"}},
		{`count(up == 1)`, []string{"up"}},
	} {
		assert.Equal(t, tc.want, promqlMetricNames(tc.expr), "promqlMetricNames(%q)", tc.expr)
	}
}

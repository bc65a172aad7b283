package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/dirsize"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
)

// The recrawl scenario: one web of pages with validators crawled in full
// (run 1), a share of its pages changed, then crawled again by a campaign
// started with From = run 1's ID (run 2), on one stack: the scheduler's
// seen store holds the fetch history run 2 reads.

// recrawlBase is the recrawl web's second octet: its hosts are 127.81.0.x.
const recrawlBase = 81

// RecrawlResult is the recrawl scenario: run 1 and run 2, each completed
// by the parent with the server's counts, and the checks that failed.
type RecrawlResult struct {
	Runs []Result
	// Pages: the web's page URLs (second URLs included); Changed: those
	// whose bytes changed between the runs.
	Pages, Changed int
	// Failed: the checks that did not hold, one sentence each.
	Failed []string
	Err    string
}

// recrawlWeb is the scenario's web: RecrawlHosts x RecrawlPages pages,
// every one a validator (an ETag on even pages, a Last-Modified on odd
// ones), RecrawlDuplicates of them also served at a second URL, no extras
// (so that every page answers 200 in run 1).
func (o Options) recrawlWeb() testweb.Config {
	return testweb.Config{Hosts: o.RecrawlHosts, PagesPerHost: o.RecrawlPages, CrossHost: true, NoExtras: true,
		Validators: true, Duplicates: o.RecrawlDuplicates, PageBytes: o.RecrawlPageBytes, Base: recrawlBase}
}

// runRecrawlScenario runs the recrawl scenario in one child (both runs
// share its stack) and checks, from the server's log: every page requested
// once per run; every page that answered 200 in run 1 asked for with a
// validator in run 2; exactly the unchanged pages answered 304.
func (o Options) runRecrawlScenario(ctx context.Context) (RecrawlResult, error) {
	var out RecrawlResult
	web, err := testweb.Start(o.recrawlWeb())
	if err != nil {
		return out, err
	}
	defer web.Close()
	out.Pages = len(web.Pages())
	j := Job{Kind: KindRecrawl, Seeds: web.Seeds(), Fleet: o.RecrawlFleet, PerHostConcurrency: o.PerHostConcurrency,
		PerHostDelay: o.PerHostDelay, AMQPURL: o.AMQPURL, Timeout: o.Timeout, Sinks: o.RecrawlSinks, PostgresURI: o.PostgresURI, Dedup: o.RecrawlDedup}
	fmt.Fprintf(o.Log, "bench: recrawl on %d hosts x %d pages (%d URLs), sinks %v, dedup %v ...\n", o.RecrawlHosts, o.RecrawlPages, out.Pages, o.RecrawlSinks, o.RecrawlDedup)
	var answered200 []string
	var changed []string
	cpu0, _ := selfUsage()
	between := func(r1 *Result) {
		cpu1, _ := selfUsage()
		fillFromWeb(r1, web)
		r1.WebCPU = cpu1 - cpu0
		answered200 = web.Answered(200)
		out.Failed = append(out.Failed, checkOnce(r1)...)
		if len(answered200) != out.Pages {
			out.Failed = append(out.Failed, fmt.Sprintf("run 1: %d pages answered 200, want every one of %d", len(answered200), out.Pages))
		}
		changed = web.Change(o.RecrawlChange)
		web.Reset()
		out.Changed = len(changed)
		cpu0 = cpu1
		fmt.Fprintf(o.Log, "bench: recrawl run 1: %d pages, %.0f pages/s; %d URLs changed\n", r1.Pages, r1.PagesPerSec(), len(changed))
	}
	runs, err := o.childRecrawl(ctx, j, between)
	if len(runs) == 2 {
		cpu1, _ := selfUsage()
		r2 := &runs[1]
		fillFromWeb(r2, web)
		r2.WebCPU = cpu1 - cpu0
		out.Failed = append(out.Failed, checkOnce(r2)...)
		out.Failed = append(out.Failed, checkConditional(web, answered200, changed)...)
		fmt.Fprintf(o.Log, "bench: recrawl run 2: %d pages, %.0f pages/s, %d answered 304, %d answered 200\n",
			r2.Pages, r2.PagesPerSec(), r2.Answered304, r2.Answered200)
	}
	out.Runs = runs
	if err == nil && len(runs) < 2 {
		err = fmt.Errorf("recrawl: %d of 2 runs reported", len(runs))
	}
	for _, r := range runs {
		if err == nil && r.Err != "" {
			err = fmt.Errorf("run %d: %s", r.Run, r.Err)
		}
	}
	if len(out.Failed) > 0 {
		err = errors.Join(err, fmt.Errorf("recrawl: %d checks failed, the first: %s", len(out.Failed), out.Failed[0]))
	}
	if err != nil {
		out.Err = err.Error()
	}
	return out, err
}

// fillFromWeb completes a run's result with what the server saw since
// its last Reset.
func fillFromWeb(r *Result, web *testweb.Web) {
	r.Missing = len(web.Missing())
	r.Pages = len(web.Pages()) - r.Missing
	for _, n := range web.Duplicates() {
		r.Duplicates += n - 1
	}
	reqs := web.Requests()
	r.Requests = len(reqs)
	r.Connections = web.Connections()
	r.Span, r.MinGap = spanAndGap(reqs)
	r.Answered304, r.Answered200 = len(web.Answered(304)), len(web.Answered(200))
	r.Conditional = 0
	for _, q := range reqs {
		if q.Conditional() {
			r.Conditional++
		}
	}
}

// checkOnce: every page of the web requested, none twice.
func checkOnce(r *Result) []string {
	var failed []string
	if r.Missing > 0 {
		failed = append(failed, fmt.Sprintf("run %d: %d pages never requested", r.Run, r.Missing))
	}
	if r.Duplicates > 0 {
		failed = append(failed, fmt.Sprintf("run %d: %d requests beyond the first of a URL", r.Run, r.Duplicates))
	}
	return failed
}

// checkConditional: every page that answered 200 in run 1 was asked for
// with a validator in run 2, and exactly the unchanged pages answered 304.
func checkConditional(web *testweb.Web, answered200, changed []string) []string {
	var failed []string
	cond := web.Conditional()
	without := 0
	for _, u := range answered200 {
		if !cond[u] {
			without++
		}
	}
	if without > 0 {
		failed = append(failed, fmt.Sprintf("run 2: %d of the %d pages that answered 200 in run 1 got no validator", without, len(answered200)))
	}
	want := web.Unchanged(changed)
	got := web.Answered(304)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		failed = append(failed, fmt.Sprintf("run 2: %d pages answered 304, want exactly the %d unchanged", len(got), len(want)))
	}
	return failed
}

// childRecrawl runs a recrawl job in `Exe -child`: the child reports run
// 1 on its stdout, between is called with it, then the child's stdin is
// closed (Job.StopOnEOF: go on) and it reports run 2. It returns the runs
// reported; the child is killed two minutes after twice the timeout.
func (o Options) childRecrawl(ctx context.Context, j Job, between func(*Result)) ([]Result, error) {
	j.StopOnEOF = true
	in, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*j.Timeout+2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.Exe, "-child")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = o.Log
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	var runs []Result
	var readErr error
	if _, err := stdin.Write(in); err != nil {
		readErr = err
	}
	dec := json.NewDecoder(stdout)
	for readErr == nil && len(runs) < 2 {
		var r Result
		if err := dec.Decode(&r); err != nil {
			readErr = fmt.Errorf("no result of run %d: %w", len(runs)+1, err)
			break
		}
		runs = append(runs, r)
		if r.Err != "" || r.Run != 1 {
			break
		}
		between(&runs[0])
		stdin.Close()
	}
	stdin.Close()
	_, _ = io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil {
		return runs, fmt.Errorf("child %s: %w", j.Kind, errors.Join(err, readErr))
	}
	return runs, readErr
}

// runRecrawl is the child's side: the stack of runDrover (in-process
// workers), run 1 reported on out, then, once next is closed (the parent
// changed the web), run 2 with From = run 1's ID, returned. Both runs
// write to every sink of j.Sinks, each run apart (its own WARC directory
// and PostgreSQL table; Kafka records told apart by their campaign
// header).
func runRecrawl(ctx context.Context, j Job, next <-chan struct{}, out io.Writer) (Result, error) {
	if next == nil {
		return Result{Run: 1}, errors.New("recrawl: the job needs StopOnEOF (the parent closes stdin once the web changed)")
	}
	core, err := startCore(ctx, j)
	if err != nil {
		return Result{Run: 1}, err
	}
	defer core.Close()
	w, err := temporalnode.StartWorkers(core.temporal.Client(), temporalnode.WorkerConfig{Identity: "bench-worker", Activities: &activities.Activities{
		Schedulers: []string{core.sched.Addr()}, Token: session.DevToken, KafkaBrokers: core.kafka.Addr(), Identity: "bench-worker",
	}})
	if err != nil {
		return Result{Run: 1}, err
	}
	defer w.Stop()
	id := fmt.Sprintf("bench-recrawl-%d", rand.IntN(1e9))
	var tables []string
	defer func() {
		for _, t := range tables {
			if err := dropTable(j.PostgresURI, t); err != nil {
				fmt.Fprintf(os.Stderr, "bench: drop table %s: %v\n", t, err)
			}
		}
	}()
	r1, err := recrawlRun(ctx, j, core, 1, id, "", &tables)
	if err != nil {
		return r1, err
	}
	r1.Kind = j.Kind
	_, r1.MaxRSS = selfUsage()
	if err := json.NewEncoder(out).Encode(r1); err != nil {
		return Result{Run: 2}, err
	}
	select {
	case <-next:
	case <-ctx.Done():
		return Result{Run: 2}, ctx.Err()
	}
	return recrawlRun(ctx, j, core, 2, id+"-2", id, &tables)
}

// recrawlRun runs one campaign of the recrawl scenario (From from, if
// set) and measures it as runDrover does, then what each sink took.
func recrawlRun(ctx context.Context, j Job, core *droverCore, run int, id, from string, tables *[]string) (res Result, err error) {
	res.Run = run
	sinks, err := recrawlSinks(j, core, run, tables)
	if err != nil {
		return res, err
	}
	cfg, inFlight, err := jobCampaign(j, id, sinks...)
	if err != nil {
		return res, err
	}
	cfg.From, cfg.Dedup = from, j.Dedup
	res.InFlight = inFlight
	_, port, _ := net.SplitHostPort(core.temporal.Address())
	temporal, rabbit := sampleProc(temporalPID(port)), sampleProc(rabbitPID())
	cpu0, _ := selfUsage()
	start := time.Now()
	st, err := runCampaign(ctx, core.temporal.Client(), cfg, j.Timeout, nil)
	res.Wall = time.Since(start)
	cpu1, _ := selfUsage()
	res.CPU = cpu1 - cpu0
	res.TemporalCPU, res.TemporalHWM = temporal.delta()
	res.RabbitCPU, res.RabbitHWM = rabbit.delta()
	res.Fetched, res.State = st.PagesFetched, st.State
	if err != nil {
		return res, fmt.Errorf("campaign %s: %w", cfg.ID, err)
	}
	if st.State != campaign.StateCompleted {
		return res, errors.New("campaign " + cfg.ID + " ended " + st.State + ": " + st.Reason)
	}
	res.SinkBytes, err = recrawlBytes(ctx, j, core, run, cfg.ID, *tables)
	return res, err
}

// recrawlSinks are run's sink URIs: Kafka's topic of the core (shared by
// both runs), a WARC directory and a PostgreSQL table of the run's own.
func recrawlSinks(j Job, core *droverCore, run int, tables *[]string) ([]string, error) {
	var uris []string
	for _, s := range j.Sinks {
		switch s {
		case "kafka":
			uris = append(uris, "kafka://"+core.kafka.Addr()+"/"+core.topic)
		case "warc":
			dir := filepath.Join(core.dir, fmt.Sprintf("warc-%d", run))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			uris = append(uris, "warc:"+dir)
		case "warc-captures":
			dir := filepath.Join(core.dir, fmt.Sprintf("warc-captures-%d", run))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			uris = append(uris, "warc:"+dir+"?records=captures")
		case "postgres":
			u, err := url.Parse(j.PostgresURI)
			if err != nil {
				return nil, fmt.Errorf("postgres URI: %w", err)
			}
			t := fmt.Sprintf("drover_bench_recrawl_%d_%d", time.Now().UnixNano(), run)
			*tables = append(*tables, t)
			q := u.Query()
			q.Set("table", t)
			u.RawQuery = q.Encode()
			uris = append(uris, u.String())
		default:
			return nil, fmt.Errorf("recrawl sink %q: want kafka, warc or postgres", s)
		}
	}
	if len(uris) == 0 {
		return nil, errors.New("recrawl: no sink; give -recrawl-sinks one of kafka, warc, warc-captures, postgres")
	}
	return uris, nil
}

// recrawlBytes is what each sink took from the campaign id, run run: the
// WARC directory's files, the Kafka records' keys, values and headers (as
// written, before the broker's framing), the PostgreSQL table's rows
// (pg_column_size, before TOAST compression shows on disk).
func recrawlBytes(ctx context.Context, j Job, core *droverCore, run int, id string, tables []string) (map[string]int64, error) {
	out := map[string]int64{}
	for _, s := range j.Sinks {
		switch s {
		case "warc":
			out[s] = dirsize.Of(filepath.Join(core.dir, fmt.Sprintf("warc-%d", run)))
		case "warc-captures":
			out[s] = dirsize.Of(filepath.Join(core.dir, fmt.Sprintf("warc-captures-%d", run)))
		case "kafka":
			rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			msgs, err := devstack.ReadTopic(rctx, core.kafka.Addr(), core.topic)
			cancel()
			if err != nil {
				return out, err
			}
			for _, m := range msgs {
				size, campaignID := len(m.Key)+len(m.Value), ""
				for _, h := range m.Headers {
					size += len(h.Key) + len(h.Value)
					if h.Key == "campaign" {
						campaignID = string(h.Value)
					}
				}
				if campaignID == id {
					out[s] += int64(size)
				}
			}
		case "postgres":
			n, err := tableBytes(ctx, j.PostgresURI, tables[len(tables)-1])
			if err != nil {
				return out, err
			}
			out[s] = n
		}
	}
	return out, nil
}

// tableBytes sums pg_column_size over a table's rows.
func tableBytes(ctx context.Context, uri, table string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, uri)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, "SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM "+pgx.Identifier{table}.Sanitize()+" t").Scan(&n)
	return n, err
}

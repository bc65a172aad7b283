package chaos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/workflows"
)

// Result is one row of the table.
type Result struct {
	Fault string
	What  string
	Sink  string
	Pages int // pages of the test web
	// MissingWeb: pages the web never served; MissingSink: pages not in
	// the sink. Both must be 0.
	MissingWeb, MissingSink int
	// DupFetches: requests beyond the first of a page, on the web's side;
	// DupRecords: records beyond the first of a page, in the sink.
	DupFetches, DupRecords int
	// Left: pages of the web not yet requested just before the fault.
	// InFlight: leases the scheduler had out just before the fault (-1:
	// not read). Sessions: FetchSessions started in Temporal just before
	// the fault, on Worker when the fault hits a worker, else on all.
	Left     int
	InFlight int64
	Sessions int
	Worker   string
	// During: requests the web served between the fault's start and end.
	During int
	// Down: from the fault's start to its end; Resumed: from its end to
	// the web's next request (-1: none came).
	Down, Resumed time.Duration
	State         string // the campaign's final state
	Took          time.Duration
	Note          string
	Err           error // the row could not be run, broke, or its fault hit no work in flight
}

// Failed: the row proves nothing (Err) or lost pages.
func (r Result) Failed() bool {
	return r.Err != nil || r.MissingWeb > 0 || r.MissingSink > 0
}

// record keeps the moment's measurements in the row; a moment never
// measured (no Key) changes nothing.
func (r *Result) record(m Moment) {
	if m.Key == "" {
		return
	}
	r.Left, r.Worker = m.Missing, m.Worker
	r.InFlight = m.Stats.InFlight
	if m.StatsErr != nil {
		r.InFlight = -1
	}
	r.Sessions = m.sessions()
	if m.Worker != "" {
		r.Sessions = m.Sessions[m.Worker]
	}
}

// Run runs each fault once, alone, on a fresh drover, against one private
// RabbitMQ node, and returns a row per fault.
func Run(ctx context.Context, opts Options, faults []Fault) ([]Result, error) {
	opts.defaults()
	rabbit, done, err := prepare(ctx, &opts, "chaos")
	if err != nil {
		return nil, err
	}
	defer done()
	var out []Result
	for _, f := range faults {
		if ctx.Err() != nil {
			break
		}
		res := runRow(ctx, opts, rabbit, f)
		if res.Err != nil {
			fmt.Fprintf(opts.Log, "chaos: %s: %v\n", f.Name, res.Err)
		}
		out = append(out, res)
	}
	return out, nil
}

// prepare makes opts' work directory (a temporary one when unset), builds
// the worker and scheduler binaries into its bin/ and starts the private
// RabbitMQ node; done stops the node and removes a temporary directory.
func prepare(ctx context.Context, opts *Options, name string) (rabbit *RabbitNode, done func(), err error) {
	var cleanup []func()
	done = func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	defer func() {
		if err != nil {
			done()
		}
	}()
	if opts.WorkDir == "" {
		dir, err := workDir("drover-" + name + "-")
		if err != nil {
			return nil, nil, err
		}
		cleanup = append(cleanup, func() { os.RemoveAll(dir) })
		opts.WorkDir = dir
	}
	if opts.BinDir == "" {
		opts.BinDir = filepath.Join(opts.WorkDir, "bin")
	}
	fmt.Fprintf(opts.Log, "%s: building the worker and scheduler into %s\n", name, opts.BinDir)
	if err := devstack.BuildDevBinaries(ctx, opts.BinDir); err != nil {
		return nil, nil, err
	}
	rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	rabbit, err = StartRabbitNode(rctx, filepath.Join(opts.WorkDir, "rabbitmq"), &prefixWriter{w: opts.Log, prefix: name + "   "})
	if err != nil {
		return nil, nil, err
	}
	cleanup = append(cleanup, rabbit.Stop)
	fmt.Fprintf(opts.Log, "%s: private RabbitMQ node %s at %s\n", name, rabbit.Name, rabbit.URL)
	return rabbit, done, nil
}

func runRow(ctx context.Context, opts Options, rabbit *RabbitNode, f Fault) (res Result) {
	res = Result{Fault: f.Name, What: f.What, Sink: f.Sink, Resumed: -1, InFlight: -1}
	if res.Sink == "" {
		res.Sink = sinkKafka
	}
	begin := time.Now()
	defer func() { res.Took = time.Since(begin) }()
	r, err := startRig(ctx, opts, f.Name, rabbit, f.spec, 90)
	if err != nil {
		res.Err = fmt.Errorf("start: %w", err)
		return res
	}
	defer r.stop()
	var s sinks
	switch res.Sink {
	case sinkPostgres:
		s.pg, err = r.usePostgres(ctx)
	case sinkWARC:
		s.warc, err = r.useWARC()
	}
	if err != nil {
		res.Err = fmt.Errorf("sink: %w", err)
		return res
	}
	pages := r.web.Pages()
	res.Pages = len(pages)
	cfg := r.campaignConfig()
	if _, err := r.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.CampaignInput{Config: cfg}); err != nil {
		res.Err = fmt.Errorf("start campaign: %w", err)
		return res
	}
	if err := r.waitTrigger(ctx, cmp.Or(f.Trigger, opts.Trigger), cfg.ID, len(pages)); err != nil {
		res.Err = err
		return res
	}
	m, err := r.awaitMoment(ctx, f, cfg.ID, cfg.FrontierKey())
	res.record(m)
	if err != nil {
		res.Err = err
		return res
	}
	before := r.web.Total()
	fctx, cancel := context.WithTimeout(ctx, faultWithin)
	start, end, note, err := f.inject(fctx, r, &s, m)
	cancel()
	res.Note = note
	if err != nil {
		res.Err = fmt.Errorf("fault: %w", err)
		return res
	}
	atEnd := r.web.Total()
	res.Down, res.During = end.Sub(start), atEnd-before
	r.logf("fault from %d to %d pages served, %s", before, atEnd, res.Down.Round(100*time.Millisecond))

	res.Resumed = r.resumed(ctx, atEnd, end)

	st, err := r.waitCampaign(ctx, cfg.ID, 10*time.Minute)
	res.State = string(st.State)
	if err != nil {
		res.Err = fmt.Errorf("campaign: %w", err)
		res.State = "not ended"
		if errors.Is(err, await.ErrFinal) {
			res.State = "ended badly"
		}
	}
	r.count(ctx, &s, cfg.ID, pages, &res)
	r.logf("done: %s, missing %d on the web and %d in %s, %d duplicate fetches", res.State, res.MissingWeb, res.MissingSink, res.Sink, res.DupFetches)
	return res
}

// waitTrigger waits until the crawl has served trigger of its pages, when
// the fault comes.
func (r *rig) waitTrigger(ctx context.Context, trigger float64, id string, pages int) error {
	at := int(trigger * float64(pages))
	r.logf("campaign %s started on %d pages; the fault comes at %d", id, pages, at)
	return await.Until(ctx, 5*time.Minute, pollEvery, func() error {
		if n := r.web.Total(); n < at {
			return fmt.Errorf("the crawl reached %d of %d pages", n, at)
		}
		return nil
	})
}

// resumed is the time from the fault's end to the web's next request
// after it (atEnd requests served by then); -1 if none came in 5 minutes.
func (r *rig) resumed(ctx context.Context, atEnd int, end time.Time) time.Duration {
	// Polled every 5 ms: this is a measurement.
	err := await.Until(ctx, 5*time.Minute, 5*time.Millisecond, func() error {
		if r.web.Total() <= atEnd {
			return errors.New("no request since the fault")
		}
		return nil
	})
	if err != nil {
		return -1
	}
	return time.Since(end)
}

// count fills res's counts: pages missing and fetched twice on the web's
// side, missing and duplicated in the sink.
func (r *rig) count(ctx context.Context, s *sinks, id string, pages []string, res *Result) {
	res.MissingWeb = len(r.web.Missing())
	for _, n := range r.web.Duplicates() {
		res.DupFetches += n - 1
	}
	var got map[string]int
	var err error
	switch {
	case s.pg != nil:
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		got, err = s.pg.count(cctx, id)
		cancel()
	case s.warc != nil:
		got, err = s.warc.count()
	default:
		got = r.kafka.Count(r.topic)
	}
	if err != nil {
		res.Err = errors.Join(res.Err, fmt.Errorf("counting the sink: %w", err))
	}
	for _, u := range pages {
		switch n := got[u]; {
		case n == 0:
			res.MissingSink++
		case n > 1:
			res.DupRecords += n - 1
		}
	}
}

// PrintTable writes the results as one markdown table; a row that failed
// (Result.Failed) says FAIL in its first column.
func PrintTable(w io.Writer, opts Options, results []Result) {
	opts.defaults()
	fmt.Fprintf(w, "| row | fault | sink | pages | pages left at fault | leases in flight at fault | sessions at fault | missing (web / sink) | dup fetches (web / sink records) | fetches during fault | fault lasted | fetching resumed after | campaign | note |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		verdict := "ok"
		if r.Failed() {
			verdict = "FAIL"
		}
		resumed := "-"
		if r.Resumed >= 0 {
			resumed = r.Resumed.Round(10 * time.Millisecond).String()
		}
		inFlight := "?"
		if r.InFlight >= 0 {
			inFlight = strconv.FormatInt(r.InFlight, 10)
		}
		sessions := strconv.Itoa(r.Sessions)
		if r.Worker != "" {
			sessions += " on " + r.Worker
		}
		note := r.Note
		if r.Err != nil {
			note = strings.TrimSpace("ERROR: " + oneLine(r.Err.Error()) + "; " + note)
		}
		fmt.Fprintf(w, "| %s | %s: %s | %s | %d | %d | %s | %s | %d / %d | %d / %d | %d | %s | %s | %s | %s |\n",
			verdict, r.Fault, r.What, r.Sink, r.Pages, r.Left, inFlight, sessions, r.MissingWeb, r.MissingSink, r.DupFetches, r.DupRecords,
			r.During, r.Down.Round(100*time.Millisecond), resumed, r.State, note)
	}
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:297] + "..."
	}
	return strings.ReplaceAll(s, "|", "/")
}

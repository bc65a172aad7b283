package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// View is one campaign as `starter status` shows it: the workflow's own
// status (query or result), its pending FetchSession activities and the
// schedulers' stats, combined. Its JSON is `status --json`'s contract.
type View struct {
	ID    string `json:"id"`
	RunID string `json:"run_id,omitempty"`
	// Frontier is what the schedulers know this run of the campaign by
	// (ID~RUN; the ID for one started before runs had names): `failures`
	// takes it in place of the ID when Temporal cannot be reached.
	Frontier string `json:"frontier,omitempty"`
	// CloseError: the campaign's Close could not reach every scheduler,
	// and why; `stop` removes what it left there.
	CloseError string `json:"close_error,omitempty"`
	// CrawlLog is the campaign's crawl log directory (crawl_log), on the
	// workers' machines; empty when it keeps none.
	CrawlLog string `json:"crawl_log,omitempty"`
	// State: running, paused, completed, stopped, failed (or starting,
	// stopping on the way).
	State string `json:"state"`
	// WorkflowStatus is Temporal's: Running, Completed, Failed, ...
	WorkflowStatus  string `json:"workflow_status"`
	FetchersDesired int    `json:"fetchers_desired"`
	FetchersActive  int    `json:"fetchers_active"`
	PagesFetched    int64  `json:"pages_fetched"`
	PagesFailed     int64  `json:"pages_failed"`
	// PagesUnchanged: of PagesFetched, pages stored as revisits of their
	// last capture (a run with --from), as the schedulers count them while
	// the campaign runs.
	PagesUnchanged int64 `json:"pages_unchanged,omitempty"`
	URLsQueued     int64 `json:"urls_queued"`
	URLsInFlight   int64 `json:"urls_in_flight"`
	// CountsAt is when the counts above were read from the schedulers:
	// now, when one answered; when none did, the workflow's last reading
	// (its Monitor's), which the counts are then; null when there was
	// none.
	CountsAt *time.Time `json:"counts_at,omitempty"`
	Restarts int        `json:"restarts"`
	// SeedsAdded counts the seeds added while the campaign ran (`seed`).
	SeedsAdded int64 `json:"seeds_added,omitempty"`
	// Reason says why the campaign paused or ended; Alert is the last
	// exception raised (restarts piling up).
	Reason string `json:"reason,omitempty"`
	Alert  string `json:"alert,omitempty"`
	// Failure is the fleet's latest fetcher failure in words, with the
	// streak it belongs to (failures in a row with no page fetched, since
	// when, how many fetchers are failing) and, when every fetcher is
	// failing, when the campaign will fail; nil when none ever failed.
	Failure   *workflows.FleetFailure `json:"failure,omitempty"`
	StartTime time.Time               `json:"start_time"`
	CloseTime *time.Time              `json:"close_time,omitempty"`
	Fetchers  []FetcherView           `json:"fetchers"`
	// Scheduler is the schedulers' sum; nil when none answered, and then
	// SchedulerError says why.
	Scheduler      *session.Stats `json:"scheduler,omitempty"`
	SchedulerError string         `json:"scheduler_error,omitempty"`
	// FailedBy counts the URLs that did not become a page, and the pages
	// with an error status, by reason (dns, refused, robots, 4xx, ...):
	// the schedulers' counts while the campaign runs, counted from the
	// failure records (`starter failures`) once it ended. {} when there
	// are none; null when they could not be read.
	FailedBy map[string]int64 `json:"failed_by"`
	// FailuresNote says when FailedBy is partial (counted from a list the
	// schedulers cut).
	FailuresNote string `json:"failures_note,omitempty"`
	// HostsDown counts the hosts failed for the campaign as unreachable
	// (their URLs fail without a fetch); null when unknown: no scheduler
	// answered, or the campaign ended and the schedulers let it go.
	HostsDown *int64 `json:"hosts_down"`
	// ConsumeError: a scheduler cannot consume the campaign's queues, and
	// why (it keeps trying); empty when all is well.
	ConsumeError string `json:"consume_error,omitempty"`
	// Vanished names the campaign's shard queues that vanished from
	// RabbitMQ while it ran: the URLs they held are lost (each is also a
	// failure record of reason vanished).
	Vanished []string `json:"vanished,omitempty"`
	// ConsumersUnaccounted: consumers of the campaign's shards that RabbitMQ
	// counts and no scheduler asked answers for (one missing from
	// DROVER_SCHEDULER, or a connection RabbitMQ has not yet seen end).
	// The campaign does not drain while there are any: they may hold URLs.
	ConsumersUnaccounted int64 `json:"consumers_unaccounted,omitempty"`
	// StatusError says why the workflow's own status is missing (no worker
	// answered the query); the counts then come from search attributes.
	StatusError string `json:"status_error,omitempty"`
	// WebUI is the campaign's page in the Temporal Web UI; "" when the
	// Web UI's address is not known (TEMPORAL_UI_URL unset and
	// TEMPORAL_ADDRESS not on loopback).
	WebUI string `json:"web_ui"`
}

// FetcherView is one fetcher of the fleet.
type FetcherView struct {
	Index         int        `json:"index"`
	ActivityID    string     `json:"activity_id,omitempty"`
	State         string     `json:"state"` // Started, Scheduled (waiting for a worker or retry), ...
	Worker        string     `json:"worker,omitempty"`
	Attempt       int32      `json:"attempt"`
	Pages         int64      `json:"pages"`
	Errors        int64      `json:"errors"`
	LastHeartbeat *time.Time `json:"last_heartbeat,omitempty"`
	Restarts      int        `json:"restarts"`
	LastFailure   string     `json:"last_failure,omitempty"`
}

// Closed reports whether the campaign's workflow has ended.
func (v View) Closed() bool { return v.WorkflowStatus != StatusRunning }

func (a *App) statusCommand() *cobra.Command {
	var asJSON, watch bool
	cmd := &cobra.Command{
		Use:   "status ID",
		Short: "Show a campaign: state, fetchers, counts",
		Args:  exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if watch {
				return a.watch(cmd.Context(), args[0], asJSON)
			}
			v, err := a.view(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printView(v, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the status as JSON")
	cmd.Flags().BoolVar(&watch, "watch", false, "refresh every 2 s until the campaign ends or Ctrl-C")
	return cmd
}

func (a *App) printView(v View, asJSON bool) error {
	if asJSON {
		return writeJSON(a.Out, v)
	}
	renderView(a.Out, v, a.Now())
	return nil
}

// view gathers one campaign's status. Only a missing campaign or an
// unreachable Temporal is an error: a silent worker or scheduler is noted
// in the view.
func (a *App) view(ctx context.Context, id string) (View, error) {
	c, err := a.temporal(ctx)
	if err != nil {
		return View{}, err
	}
	ex, err := c.Describe(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return View{}, failf("no campaign %s", id)
	}
	if err != nil {
		return View{}, fmt.Errorf("cannot describe campaign %s: %w", id, err)
	}
	key := ex.FrontierKey()
	v := View{
		ID: id, RunID: ex.RunID, WorkflowStatus: ex.Status, StartTime: ex.StartTime,
		State: ex.State, PagesFetched: ex.PagesFetched, WebUI: a.Env.WorkflowURL(id),
		Fetchers: []FetcherView{},
	}
	if !ex.CloseTime.IsZero() {
		t := ex.CloseTime
		v.CloseTime = &t
	}

	var st workflows.Status
	var stErr error
	qctx, cancel := context.WithTimeout(ctx, queryTimeout)
	switch ex.Status {
	case StatusRunning:
		stErr = c.Query(qctx, id, workflows.QueryStatus, &st)
	case StatusCompleted:
		stErr = c.Result(qctx, id, &st)
	case StatusFailed:
		// A failed campaign has no result: its error says why, and
		// carries its final Status.
		stErr = c.Result(qctx, id, &st)
		if failed, reason, ok := failureOf(stErr); ok {
			st, stErr = failed, nil
			st.Reason = orElse(st.Reason, reason)
		}
	}
	cancel()
	switch {
	case stErr != nil && errors.Is(qctx.Err(), context.DeadlineExceeded):
		v.StatusError = fmt.Sprintf("no answer within %s; is a worker running on task queue %s?", queryTimeout, workflows.TaskQueue)
	case stErr != nil:
		v.StatusError = oneLine(stErr.Error())
	case ex.Status == StatusRunning || ex.Status == StatusCompleted || ex.Status == StatusFailed:
		v.applyStatus(st)
		if st.Frontier != "" {
			key = st.Frontier
		}
	}
	v.State = stateOf(ex.Status, v.State)
	v.Frontier, v.CloseError, v.CrawlLog = key, st.CloseError, st.CrawlLog

	if ex.Status == StatusRunning {
		v.addFetchers(ex.Pending, st)
		v.addSchedulerStats(a.schedulerStats(ctx, key))
		if v.SchedulerError == "" {
			now := a.Now()
			v.CountsAt = &now
		}
	} else {
		a.addFailureCounts(ctx, &v, key)
	}
	return v, nil
}

func (v *View) applyStatus(st workflows.Status) {
	if st.State != "" {
		v.State = st.State
	}
	v.FetchersDesired = st.FetchersDesired
	v.FetchersActive = st.FetchersActive
	v.PagesFetched = max(v.PagesFetched, st.PagesFetched)
	v.PagesFailed = st.PagesFailed
	v.URLsQueued = st.URLsQueued
	v.URLsInFlight = st.URLsInFlight
	if !st.CountsAt.IsZero() {
		t := st.CountsAt
		v.CountsAt = &t
	}
	v.Restarts = st.Restarts
	v.SeedsAdded = st.SeedsAdded
	v.Reason = st.Reason
	v.Alert = st.Alert
	v.Failure = st.Failure
}

// failureOf reads a failed campaign's error: the final Status it carries
// (none from a run that failed otherwise: a panic, a bad config) and its
// reason, the message without the "campaign ID failed: " the workflow puts
// first.
func failureOf(err error) (workflows.Status, string, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) {
		return workflows.Status{}, "", false
	}
	var st workflows.Status
	if app.HasDetails() {
		_ = app.Details(&st)
	}
	reason := app.Message()
	if _, after, ok := strings.Cut(reason, " failed: "); ok && strings.HasPrefix(reason, "campaign ") {
		reason = after
	}
	return st, reason, true
}

func orElse(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// stateOf is the campaign state given Temporal's status and what the
// workflow said: a run closed from outside (terminated, canceled from the
// Web UI) ended like `stop`; one that failed or timed out failed.
func stateOf(wfStatus, reported string) string {
	switch wfStatus {
	case StatusRunning:
		if reported == "" || isFinal(reported) {
			return campaign.StateRunning
		}
		return reported
	case StatusCompleted:
		if reported == campaign.StateStopped || reported == campaign.StateFailed {
			return reported
		}
		return campaign.StateCompleted
	case StatusTerminated, StatusCanceled:
		return campaign.StateStopped
	}
	return campaign.StateFailed
}

func isFinal(state string) bool {
	return state == campaign.StateCompleted || state == campaign.StateStopped || state == campaign.StateFailed
}

// addFetchers merges the pending FetchSession activities (what the workers
// report) with the workflow's view of its fleet (restarts).
func (v *View) addFetchers(pending []PendingActivity, st workflows.Status) {
	byIndex := map[int]*FetcherView{}
	get := func(i int) *FetcherView {
		if f, ok := byIndex[i]; ok {
			return f
		}
		f := &FetcherView{Index: i, State: "Idle"}
		byIndex[i] = f
		return f
	}
	for _, fs := range st.Fetchers {
		f := get(fs.Index)
		f.Restarts, f.LastFailure = fs.Restarts, fs.LastError
	}
	for _, p := range pending {
		idx, ok := fetcherIndex(p)
		if !ok {
			continue
		}
		f := get(idx)
		f.ActivityID, f.State, f.Worker, f.Attempt = p.ActivityID, p.State, p.Worker, p.Attempt
		if p.LastFailure != "" {
			f.LastFailure = p.LastFailure
		}
		if !p.LastHeartbeat.IsZero() {
			t := p.LastHeartbeat
			f.LastHeartbeat = &t
		}
		if p.Counters != nil {
			f.Pages, f.Errors = p.Counters.Fetched, p.Counters.Errors
			if f.Worker == "" {
				f.Worker = p.Counters.Worker
			}
		}
	}
	v.Fetchers = make([]FetcherView, 0, len(byIndex))
	for _, f := range byIndex {
		v.Fetchers = append(v.Fetchers, *f)
	}
	sort.Slice(v.Fetchers, func(i, j int) bool { return v.Fetchers[i].Index < v.Fetchers[j].Index })
	if v.FetchersActive == 0 && v.StatusError != "" {
		// No word from the workflow: count the sessions the server sees.
		for _, f := range v.Fetchers {
			if f.State == "Started" {
				v.FetchersActive++
			}
		}
	}
}

// fetcherIndex finds a pending activity's fleet index: from its heartbeat
// details, else from its activity ID, "fetcher-<index>-<start>" as the
// workflow names it.
func fetcherIndex(p PendingActivity) (int, bool) {
	if p.Type != workflows.FetchSessionActivity {
		return 0, false // Monitor and the other small activities
	}
	if p.Counters != nil {
		return p.Counters.Index, true
	}
	rest, ok := strings.CutPrefix(p.ActivityID, "fetcher-")
	if !ok {
		return 0, false
	}
	num, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// queryTimeout bounds the status query: a query needs a worker, and one
// that just died holds it for its sticky timeout (5 s by default).
const queryTimeout = 10 * time.Second

type statsResult struct {
	addrs []string
	stats session.Stats
	err   error
}

func (a *App) schedulerStats(ctx context.Context, id string) statsResult {
	if a.Stats == nil {
		return statsResult{addrs: a.Env.Schedulers, err: errors.New("no scheduler stats configured")}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := a.Stats(sctx, a.Env.Schedulers, a.Env.Token, id)
	return statsResult{a.Env.Schedulers, s, err}
}

// addSchedulerStats prefers the schedulers' live gauges (queued, in
// flight) and takes the larger of the two views' counts, which only grow.
func (v *View) addSchedulerStats(r statsResult) {
	if r.err != nil {
		v.SchedulerError = fmt.Sprintf("no scheduler reachable at %s: %s", strings.Join(r.addrs, ","), oneLine(r.err.Error()))
		return
	}
	s := r.stats
	v.Scheduler = &s
	v.PagesFetched = max(v.PagesFetched, s.Fetched)
	v.PagesFailed = max(v.PagesFailed, s.Failed)
	v.PagesUnchanged = s.Unchanged
	// Queued counts what waits in RabbitMQ and what a scheduler holds for
	// its host without having leased it yet.
	v.URLsQueued = s.Queued + max(s.Held-s.InFlight, 0)
	v.URLsInFlight = s.InFlight
	v.FailedBy = map[string]int64{}
	for k, n := range s.FailedBy {
		v.FailedBy[k] = n
	}
	down := s.HostsDown
	v.HostsDown = &down
	v.ConsumeError = s.ConsumeError
	v.Vanished = s.Vanished
	v.ConsumersUnaccounted = max(s.Consumers-s.Answering, 0)
}

// addFailureCounts counts an ended campaign's failures by reason from its
// failure records: the schedulers forget a campaign's counts when it ends,
// its records stay. Without a scheduler the counts stay unknown.
func (a *App) addFailureCounts(ctx context.Context, v *View, key string) {
	if a.Failures == nil {
		return
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fs, total, err := a.Failures(fctx, a.Env.Schedulers, a.Env.Token, key, "")
	if err != nil {
		v.SchedulerError = fmt.Sprintf("no scheduler reachable at %s: %s", strings.Join(a.Env.Schedulers, ","), oneLine(err.Error()))
		return
	}
	v.FailedBy = map[string]int64{}
	for _, f := range fs {
		v.FailedBy[f.Reason]++
	}
	if total > len(fs) {
		v.FailuresNote = fmt.Sprintf("counted from %d of %d failure records (the schedulers cut the list)", len(fs), total)
	}
}

// watch refreshes the status every Interval until the campaign ends or
// ctx is done (Ctrl-C).
func (a *App) watch(ctx context.Context, id string, asJSON bool) error {
	tty := !asJSON && isTerminal(a.Out)
	t := time.NewTicker(a.Interval)
	defer t.Stop()
	for {
		v, err := a.view(ctx, id)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if tty {
			io.WriteString(a.Out, "\033[H\033[2J") // clear the screen
		}
		if err := a.printView(v, asJSON); err != nil {
			return err
		}
		if v.Closed() {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !tty && !asJSON {
			fmt.Fprintln(a.Out, strings.Repeat("-", 40))
		}
	}
}

package workflows

import (
	"time"

	"github.com/drover-crawl/drover/campaign"
)

// CampaignInput is the Campaign workflow's one input.
//
// A new campaign is started with only Config set. State is nil on the first
// run and set by the workflow itself when it continues as new: it carries
// everything the next run needs across continue-as-new, so that the config stays the one thing an
// operator writes and the Web UI shows.
type CampaignInput struct {
	Config campaign.Config `json:"config"`
	State  *CampaignState  `json:"state,omitempty"`
	// HistoryLimit is the history length (events) after which the campaign
	// continues as new; 0 means DefaultHistoryLimit. Tests set it low.
	HistoryLimit int `json:"history_limit,omitempty"`
}

// CampaignState is what one run of the workflow hands to the next across
// continue-as-new. Control events that arrived before the handover are
// already applied to it (see continueAsNew), so none is carried pending.
type CampaignState struct {
	State  string `json:"state"`            // a campaign.State* constant
	Reason string `json:"reason,omitempty"` // why it paused or ended

	FetchersDesired int  `json:"fetchers_desired"`
	Seeded          bool `json:"seeded"`
	// SeedsAdded counts the seeds added while the campaign ran (the
	// "seed" Update).
	SeedsAdded int64 `json:"seeds_added,omitempty"`
	// StartedAt is the first run's start; MaxDuration counts from it.
	StartedAt time.Time `json:"started_at"`
	// Run is the continue-as-new generation: 0 for the first run.
	Run int `json:"run"`

	// Restarts counts every fetcher restart, failures and restart signals.
	Restarts int `json:"restarts"`
	// RecentFailures holds the times of failure restarts within the last
	// hour, for the exception notification.
	RecentFailures []time.Time `json:"recent_failures,omitempty"`
	AlertedAt      time.Time   `json:"alerted_at"`
	// ErrorAlertedAt: the last error-rate spike notification.
	ErrorAlertedAt time.Time `json:"error_alerted_at"`
	Alert          string    `json:"alert,omitempty"`

	// Fetchers is per fetcher index; Running is recomputed by each run.
	Fetchers []FetcherStatus `json:"fetchers,omitempty"`

	// Counts as last reported by Monitor (or Close).
	PagesFetched int64 `json:"pages_fetched"`
	PagesFailed  int64 `json:"pages_failed"`
	URLsQueued   int64 `json:"urls_queued"`
	URLsInFlight int64 `json:"urls_in_flight"`
	// CountsAt is when Monitor read the counts above from the schedulers
	// (zero before the first reading): what `status` shows their age by
	// when no scheduler answers.
	CountsAt time.Time `json:"counts_at,omitzero"`

	// Failure is the fleet's latest fetcher failure and its streak; nil
	// until a fetcher failed. See failing.go.
	Failure *FleetFailure `json:"failure,omitempty"`
	// ProgressAt is when the workflow last saw a page fetched (Monitor's
	// count rising, or a session's own count); zero before the first.
	ProgressAt time.Time `json:"progress_at,omitzero"`
	// AllFailingSince is when every desired fetcher came to be failing;
	// zero while one is not. FailAfter counts from the later of it and
	// ProgressAt.
	AllFailingSince time.Time `json:"all_failing_since,omitzero"`
	// FailingAlertedAt: the last "fetchers failing" notification.
	FailingAlertedAt time.Time `json:"failing_alerted_at,omitzero"`
}

// FleetFailure is what the status query, `starter status` and the Web UI
// show of fetchers that fail: the latest failure in words, and the streak
// of failures with no page fetched in between that it belongs to.
type FleetFailure struct {
	// Reason is the failure's kind: the activity error's type
	// (SinkUnavailable, SessionRefused, SchedulerUnreachable, ...),
	// HeartbeatTimeout (a worker died or hung), or SessionEnded.
	Reason string `json:"reason"`
	// Message is the error's own words, cut short.
	Message string `json:"message"`
	// Fetcher is the index of the fetcher that failed last; At is when.
	Fetcher int       `json:"fetcher"`
	At      time.Time `json:"at"`
	// Since is the first failure of the streak; Consecutive counts the
	// streak's failures (all fetchers together). Both are reset by a page
	// fetched: Consecutive 0 means the fleet recovered since At.
	Since       time.Time `json:"since,omitzero"`
	Consecutive int       `json:"consecutive"`
	// Failing is how many of the desired fetchers are failing now (their
	// last session failed, with no page fetched since), out of Desired.
	// Status fills them in; they are not carried.
	Failing int `json:"failing"`
	Desired int `json:"desired"`
	// FailAt is when the campaign will end as failed if every fetcher
	// keeps failing and no page is fetched (config fail_after); zero
	// while some fetcher is not failing.
	FailAt time.Time `json:"fail_at,omitzero"`
}

// Text is the failure in one line: the reason and the error's words.
func (f FleetFailure) Text() string {
	if f.Message == "" {
		return f.Reason
	}
	return f.Reason + ": " + f.Message
}

// FetcherStatus is what the workflow knows of one fetcher of the fleet.
// Fetched and Failed add up the counters that the fetcher's ended sessions
// returned; a running session's own counts are in its heartbeat details,
// which `starter status` reads with DescribeWorkflowExecution.
type FetcherStatus struct {
	Index     int    `json:"index"`
	Running   bool   `json:"running"`
	Restarts  int    `json:"restarts"`
	LastError string `json:"last_error,omitempty"`
	Fetched   int64  `json:"fetched"`
	Failed    int64  `json:"failed"`
	// Failing counts this fetcher's failures since a page was last fetched
	// (or since a resume or restart signal gave it a fresh start): 0 means
	// it is not failing.
	Failing int `json:"failing,omitempty"`
}

// Status is the answer to QueryStatus and the workflow's result.
type Status struct {
	ID              string          `json:"id"`
	State           string          `json:"state"` // a campaign.State* constant
	FetchersDesired int             `json:"fetchers_desired"`
	FetchersActive  int             `json:"fetchers_active"`
	Fetchers        []FetcherStatus `json:"fetchers,omitempty"`

	// As last reported by Monitor.
	PagesFetched int64 `json:"pages_fetched"`
	PagesFailed  int64 `json:"pages_failed"`
	URLsQueued   int64 `json:"urls_queued"`
	URLsInFlight int64 `json:"urls_in_flight"`
	// CountsAt is when the schedulers were last read for the counts
	// above; zero before the first reading (or in a run recorded before
	// it was kept).
	CountsAt time.Time `json:"counts_at,omitzero"`

	Restarts  int       `json:"restarts"`
	StartedAt time.Time `json:"started_at"`
	// Reason says why the campaign paused or ended.
	Reason string `json:"reason,omitempty"`
	// Alert is the last exception raised (restarts piling up, fetchers
	// failing, an error-rate spike), if any.
	Alert string `json:"alert,omitempty"`
	// Failure is the latest fetcher failure and its streak (see
	// FleetFailure); nil when no fetcher ever failed.
	Failure *FleetFailure `json:"failure,omitempty"`
	// Run is the continue-as-new generation.
	Run int `json:"run"`
	// Frontier is the key of this run of the campaign in the frontier
	// (campaign.Config.FrontierKey): what the schedulers know it by.
	Frontier string `json:"frontier,omitempty"`
	// CrawlLog is the campaign's crawl log directory (its config's
	// crawl_log); empty when it keeps none.
	CrawlLog string `json:"crawl_log,omitempty"`
	// CloseError says why the campaign's Close failed (a scheduler it
	// could not reach): what the campaign left there stays until the ID
	// runs again or `starter stop` removes it. Empty when it closed.
	CloseError string `json:"close_error,omitempty"`
	// SeedsAdded counts the seeds added while the campaign ran (`starter
	// seed`, the "seed" Update).
	SeedsAdded int64 `json:"seeds_added,omitempty"`
}

// PauseSignal is SignalPause's payload; it may be omitted
// (`temporal workflow signal --name pause`).
type PauseSignal struct {
	Reason string `json:"reason,omitempty"`
	// Seq orders pause and resume signals that reach the workflow in one
	// task (the SDK loses their order across channels): the sender's
	// clock in nanoseconds. The starter sets it; a signal without it
	// (the temporal CLI) falls back to "pause wins".
	Seq int64 `json:"seq,omitempty"`
}

// ResumeSignal is SignalResume's payload; it may be omitted.
type ResumeSignal struct {
	// Seq: see PauseSignal.Seq.
	Seq int64 `json:"seq,omitempty"`
}

// StopSignal is SignalStop's payload; it may be omitted.
type StopSignal struct {
	Reason string `json:"reason,omitempty"`
}

// RestartSignal is SignalRestart's payload: the index of the fetcher to
// restart (`--input '{"fetcher": 2}'`).
type RestartSignal struct {
	Fetcher int `json:"fetcher"`
}

// ScaleRequest is UpdateScale's input: the number of fetchers wanted.
type ScaleRequest struct {
	Fetchers int `json:"fetchers"`
}

// ScaleResult is UpdateScale's result.
type ScaleResult struct {
	Previous int `json:"previous"`
	Fetchers int `json:"fetchers"`
}

// isEnded reports whether s is a final state.
func isEnded(s string) bool {
	return s == campaign.StateCompleted || s == campaign.StateStopped || s == campaign.StateFailed
}

package workflows

import (
	"time"

	"github.com/drover-crawl/drover/campaign"
)

// The inputs and results of the activities the Campaign workflow calls (by
// the names in names.go). The activities (package activities) implement
// them; the types live here so that the workflow does not import the
// activities, and with them the fetcher and the sinks.

// SeedInput is the input of Seed.
type SeedInput struct {
	Config campaign.Config
}

// SeedResult is the result of Seed.
type SeedResult struct {
	Seeded int
}

// FetchSessionInput is the input of FetchSession.
type FetchSessionInput struct {
	Config campaign.Config
	// Index is the fetcher's index in the fleet (0-based), stable across
	// restarts, so `restart --fetcher K` names it.
	Index int
}

// SessionCounters are a FetchSession's counters: its heartbeat details and
// its result. Counts are for this activity attempt.
type SessionCounters struct {
	Index     int       `json:"index"`
	Worker    string    `json:"worker"`
	Scheduler string    `json:"scheduler"`
	Fetched   int64     `json:"fetched"`
	Failed    int64     `json:"failed"`
	Errors    int64     `json:"errors"`
	InFlight  int       `json:"in_flight"`
	Since     time.Time `json:"since"`
}

// MonitorInput is the input of Monitor.
type MonitorInput struct {
	Config campaign.Config
	// Report: return after at most this long with the current stats, so the
	// workflow can update its counts (and the Web UI) now and then.
	Report time.Duration
}

// MonitorResult says why Monitor returned.
type MonitorResult struct {
	// Drained: nothing queued, held or in flight on any scheduler, twice in
	// a row with no publish or ack between.
	Drained bool
	// CapReached: max-pages reached.
	CapReached bool
	Stats      Counts
	// ReadAt is when Stats was read from the schedulers.
	ReadAt time.Time `json:",omitempty"`
	// Unread: no scheduler answered during the whole window, so Stats is
	// no reading (zero), and the workflow keeps the counts it had. A
	// result recorded before this field existed decodes as false.
	Unread bool `json:",omitempty"`
}

// EndSessionsInput is the input of EndSessions: the campaign (its
// frontier key, campaign.Config.FrontierKey) and the keys of the sessions
// to end (SessionKey).
type EndSessionsInput struct {
	Campaign string
	Keys     []string
}

// EndSessionsResult counts the sessions that were open on the schedulers.
type EndSessionsResult struct {
	Ended int
}

// SessionKey names one FetchSession for the schedulers (session.Hello.Key):
// its workflow run and its activity ID, which the workflow knows when it
// starts it and the activity reads from its info.
func SessionKey(runID, activityID string) string { return runID + "/" + activityID }

// CloseInput is the input of Close.
type CloseInput struct {
	Config campaign.Config
	// Delete removes the campaign's queues (the campaign ended).
	Delete bool
}

// CloseResult is the result of Close: the last stats before the queues went.
type CloseResult struct {
	Stats Counts
}

// Counts are the schedulers' counts that the workflow keeps: a type of
// its own, which the activities copy from the session protocol's
// (session.Stats), so that a change to the wire does not change what a
// workflow's history holds. Its JSON names are session.Stats's, so the
// results recorded when the workflow kept that type decode as before.
type Counts struct {
	Fetched    int64 `json:"fetched"`
	Failed     int64 `json:"failed"`
	Queued     int64 `json:"queued"`
	InFlight   int64 `json:"in_flight"`
	CapReached bool  `json:"cap_reached,omitempty"`
}

// NotifyInput is an exception notification.
type NotifyInput struct {
	URL      string
	Campaign string
	Event    string // "fetchers_failing", "fetcher_restarts", "error_rate", "completed", "failed", "stopped"
	Text     string
}

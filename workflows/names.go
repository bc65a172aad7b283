package workflows

import "go.temporal.io/sdk/temporal"

// One source of names: the worker, the starter, the tests and the
// `temporal` CLI all use these, so a task queue or signal name can never
// drift between them.
const (
	// WorkflowName is the Campaign workflow's type name. Register with
	// workflow.RegisterOptions{Name: WorkflowName}.
	WorkflowName = "Campaign"

	// FetchSessionActivity is the FetchSession activity's type name, as the
	// worker registers it and `starter status` finds the fleet among a
	// run's pending activities.
	FetchSessionActivity = "FetchSession"
	// SeedActivity, MonitorActivity, CloseActivity and NotifyActivity are
	// the small activities' type names (inputs and results in activity.go),
	// as the worker registers them and the workflow calls them.
	SeedActivity    = "Seed"
	MonitorActivity = "Monitor"
	CloseActivity   = "Close"
	NotifyActivity  = "Notify"
	// EndSessionsActivity ends fetcher sessions through the schedulers
	// (EndSessionsInput), so that a pause, a stop or a scale-down reaches
	// them at once rather than on their next heartbeat response.
	EndSessionsActivity = "EndSessions"

	// TaskQueue hosts the Campaign workflow and its small activities (Seed,
	// Monitor, Close, Notify).
	TaskQueue = "drover-campaign"
	// FetchTaskQueue hosts the long-running FetchSession activities, so that
	// fetch capacity can be scaled (and drained) apart from the workflows.
	FetchTaskQueue = "drover-fetch"

	// SignalPause takes PauseSignal: cancel the fleet (leases go back to the
	// frontier) and wait for resume.
	SignalPause = "pause"
	// SignalResume takes ResumeSignal: start the fleet again.
	SignalResume = "resume"
	// SignalStop takes StopSignal: stop the fleet, close and end "stopped".
	SignalStop = "stop"
	// SignalRestart takes RestartSignal: restart one fetcher by index.
	SignalRestart = "restart"

	// UpdateScale takes ScaleRequest and returns ScaleResult.
	UpdateScale = "scale"

	// QueryStatus returns Status.
	QueryStatus = "status"

	// SearchAttributeState and SearchAttributePages are the names to
	// register on the server (`temporal operator search-attribute create
	// --name CampaignState --type Keyword --name PagesFetched --type Int`)
	// before a campaign upserts them.
	SearchAttributeState = "CampaignState"
	SearchAttributePages = "PagesFetched"

	// DefaultHistoryLimit is the history length (events) after which a
	// campaign continues as new, unless the server suggests it earlier.
	DefaultHistoryLimit = 5000
)

// Typed search attribute keys, for upserts and for visibility queries
// (`CampaignState = "running"`).
var (
	CampaignStateKey = temporal.NewSearchAttributeKeyKeyword(SearchAttributeState)
	PagesFetchedKey  = temporal.NewSearchAttributeKeyInt64(SearchAttributePages)
)

package cli

import (
	"context"
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/drover-crawl/drover/workflows"
)

// Errors the Campaigns implementations return (wrapped); the commands turn
// them into one line for the operator.
var (
	// ErrNotFound: no workflow with that ID in the namespace.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyStarted: a workflow with that ID is running.
	ErrAlreadyStarted = errors.New("already started")
	// ErrNotRunning: the workflow exists but has closed, so it takes no
	// signal or update.
	ErrNotRunning = errors.New("not running")
)

// Campaigns is what the commands need from Temporal, in the commands' terms;
// temporalClient implements it over the SDK, tests over a map.
type Campaigns interface {
	// Start starts a workflow; ErrAlreadyStarted when its ID is running.
	Start(ctx context.Context, req StartRequest) (runID string, err error)
	// Describe describes the latest run of a workflow; ErrNotFound.
	Describe(ctx context.Context, id string) (Execution, error)
	// Query runs a query on the latest run and decodes its answer into result.
	Query(ctx context.Context, id, name string, result any) error
	// Result waits for the latest run's result and decodes it into result.
	Result(ctx context.Context, id string, result any) error
	// Signal sends a signal; ErrNotFound, ErrNotRunning.
	Signal(ctx context.Context, id, name string, arg any) error
	// Update sends an update and waits for its completion; a validator's
	// rejection comes back as an *UpdateRejectedError.
	Update(ctx context.Context, id, name string, arg, result any) error
	// List lists the workflows a visibility query selects, newest first.
	List(ctx context.Context, query string) ([]Execution, error)
}

// StartRequest is one workflow start.
type StartRequest struct {
	ID               string
	TaskQueue        string
	Workflow         any // the workflow function or its type name
	Input            any
	Summary          string
	Details          string
	SearchAttributes temporal.SearchAttributes
}

// Workflow execution statuses as Execution.Status reports them (Temporal's
// names).
const (
	StatusRunning        = "Running"
	StatusCompleted      = "Completed"
	StatusFailed         = "Failed"
	StatusCanceled       = "Canceled"
	StatusTerminated     = "Terminated"
	StatusContinuedAsNew = "ContinuedAsNew"
	StatusTimedOut       = "TimedOut"
)

// Execution is what the starter reads of one workflow run.
type Execution struct {
	ID        string
	RunID     string
	Type      string
	Status    string // one of the Status* constants
	StartTime time.Time
	CloseTime time.Time
	// State and PagesFetched are the CampaignState and PagesFetched search
	// attributes (empty and 0 when unset).
	State        string
	PagesFetched int64
	Pending      []PendingActivity
	// Frontier is the run's key in the frontier (the memo
	// workflows.MemoFrontier); empty for a campaign started before runs had
	// names, whose key is its ID (FrontierKey).
	Frontier string
	// DecodeError says which search attributes could not be decoded (State
	// and PagesFetched are then unknown, not empty and 0).
	DecodeError string
}

// PendingActivity is one running (or retrying) activity of a run.
type PendingActivity struct {
	ActivityID    string
	Type          string
	State         string // Scheduled, Started, CancelRequested, Paused
	Worker        string // last worker identity
	Attempt       int32
	LastHeartbeat time.Time
	// Counters are the decoded heartbeat details of a FetchSession; nil
	// when it has not heartbeated yet or sent something else.
	Counters    *workflows.SessionCounters
	LastFailure string
}

// UpdateRejectedError is an update refused by its validator or failed by
// its handler; Message is the workflow's own words.
type UpdateRejectedError struct {
	Message string
}

func (e *UpdateRejectedError) Error() string { return e.Message }

// FrontierKey is what the schedulers know this run of the campaign by.
func (e Execution) FrontierKey() string {
	if e.Frontier != "" {
		return e.Frontier
	}
	return e.ID
}

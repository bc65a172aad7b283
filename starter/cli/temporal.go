package cli

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/workflows"
)

// dialTimeout bounds the connection attempt: Temporal down should cost the
// operator seconds, not the gRPC backoff.
const dialTimeout = 5 * time.Second

// DialTemporal connects to the Temporal frontend of env and checks that it
// answers; its error is the one line the operator sees.
func DialTemporal(ctx context.Context, env Env) (Campaigns, error) {
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	opts := client.Options{
		HostPort:  env.TemporalAddress,
		Namespace: env.TemporalNamespace,
		// The SDK's default logger writes to stderr; the CLI speaks for itself.
		Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler)),
	}
	if err := temporalnode.Secure(&opts, env.Temporal); err != nil {
		return nil, err
	}
	c, err := client.DialContext(dctx, opts)
	if err == nil {
		_, err = c.CheckHealth(dctx, &client.CheckHealthRequest{})
		if err != nil {
			c.Close()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s: %s; start the dev stack with `make dev` or set TEMPORAL_ADDRESS",
			env.TemporalAddress, reason(err, opts.ConnectionOptions.TLS))
	}
	return &temporalClient{c: c, namespace: env.TemporalNamespace}, nil
}

// reason shortens a gRPC connection error to its cause ("dial tcp
// 127.0.0.1:7233: connect: connection refused").
func reason(err error, tc *tls.Config) string {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("no answer within %s", dialTimeout)
	}
	if hint, _ := tlsconf.TemporalHint(err, tc); hint != "" {
		return hint
	}
	msg := err.Error()
	if _, after, ok := strings.Cut(msg, "Error while dialing: "); ok {
		return strings.TrimRight(after, `"`)
	}
	return msg
}

// temporalClient implements Campaigns with the Temporal SDK.
type temporalClient struct {
	c         client.Client
	namespace string
}

func (t *temporalClient) Close() { t.c.Close() }

func (t *temporalClient) Start(ctx context.Context, req StartRequest) (string, error) {
	run, err := t.c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        req.ID,
		TaskQueue: req.TaskQueue,
		// A running campaign with this ID is an error; a finished one may
		// be started again under the same ID.
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		StaticSummary:                            req.Summary,
		StaticDetails:                            req.Details,
		TypedSearchAttributes:                    req.SearchAttributes,
	}, req.Workflow, req.Input)
	if err != nil {
		return "", translate(err)
	}
	return run.GetRunID(), nil
}

func (t *temporalClient) Describe(ctx context.Context, id string) (Execution, error) {
	desc, err := t.c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return Execution{}, translate(err)
	}
	resp := desc.RawResponse
	ex := execution(resp.GetWorkflowExecutionInfo())
	for _, pa := range resp.GetPendingActivities() {
		ex.Pending = append(ex.Pending, pendingActivity(pa))
	}
	return ex, nil
}

func (t *temporalClient) Query(ctx context.Context, id, name string, result any) error {
	v, err := t.c.QueryWorkflow(ctx, id, "", name)
	if err != nil {
		return translate(err)
	}
	return v.Get(result)
}

func (t *temporalClient) Result(ctx context.Context, id string, result any) error {
	return translate(t.c.GetWorkflow(ctx, id, "").Get(ctx, result))
}

func (t *temporalClient) Signal(ctx context.Context, id, name string, arg any) error {
	return translate(t.c.SignalWorkflow(ctx, id, "", name, arg))
}

func (t *temporalClient) Update(ctx context.Context, id, name string, arg, result any) error {
	h, err := t.c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID:   id,
		UpdateName:   name,
		Args:         []any{arg},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	if err == nil {
		err = h.Get(ctx, result)
	}
	// A validator's rejection, or the handler's error, is an
	// ApplicationError whose message is meant for the operator.
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return &UpdateRejectedError{Message: app.Message()}
	}
	return translate(err)
}

func (t *temporalClient) List(ctx context.Context, query string) ([]Execution, error) {
	var out []Execution
	var token []byte
	for {
		resp, err := t.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace:     t.namespace,
			Query:         query,
			NextPageToken: token,
		})
		if err != nil {
			return nil, translate(err)
		}
		for _, info := range resp.GetExecutions() {
			out = append(out, execution(info))
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return out, nil
		}
	}
}

// translate maps the SDK's errors onto the package's sentinels.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	var notFound *serviceerror.NotFound
	switch {
	case errors.As(err, &started):
		return fmt.Errorf("%w: %s", ErrAlreadyStarted, started.Message)
	case errors.As(err, &notFound):
		// The server says "workflow execution already completed" for a
		// signal to a closed run, and "not found" for an unknown ID.
		return fmt.Errorf("%w: %s", ErrNotFound, notFound.Message)
	}
	return err
}

func execution(info *workflowpb.WorkflowExecutionInfo) Execution {
	ex := Execution{
		ID:        info.GetExecution().GetWorkflowId(),
		RunID:     info.GetExecution().GetRunId(),
		Type:      info.GetType().GetName(),
		Status:    statusName(info.GetStatus()),
		StartTime: timeOf(info.GetStartTime()),
		CloseTime: timeOf(info.GetCloseTime()),
	}
	fields := info.GetSearchAttributes().GetIndexedFields()
	dc := converter.GetDefaultDataConverter()
	var bad []string
	if p, ok := info.GetMemo().GetFields()[workflows.MemoFrontier]; ok {
		if err := dc.FromPayload(p, &ex.Frontier); err != nil {
			bad = append(bad, fmt.Sprintf("memo %s: %v", workflows.MemoFrontier, err))
		}
	}
	if p, ok := fields[workflows.SearchAttributeState]; ok {
		if err := dc.FromPayload(p, &ex.State); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", workflows.SearchAttributeState, err))
		}
	}
	if p, ok := fields[workflows.SearchAttributePages]; ok {
		if err := dc.FromPayload(p, &ex.PagesFetched); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", workflows.SearchAttributePages, err))
		}
	}
	if len(bad) > 0 {
		// Say so rather than show an empty state or 0 pages as if known.
		ex.DecodeError = "search attributes not decoded: " + strings.Join(bad, "; ")
	}
	return ex
}

func pendingActivity(pa *workflowpb.PendingActivityInfo) PendingActivity {
	p := PendingActivity{
		ActivityID:    pa.GetActivityId(),
		Type:          pa.GetActivityType().GetName(),
		State:         activityStateName(pa.GetState()),
		Worker:        pa.GetLastWorkerIdentity(),
		Attempt:       pa.GetAttempt(),
		LastHeartbeat: timeOf(pa.GetLastHeartbeatTime()),
		Counters:      decodeCounters(pa.GetHeartbeatDetails()),
	}
	if f := pa.GetLastFailure(); f != nil {
		p.LastFailure = f.GetMessage()
	}
	return p
}

// decodeCounters decodes a FetchSession's heartbeat details; nil when
// there are none or they are not SessionCounters.
func decodeCounters(details *commonpb.Payloads) *workflows.SessionCounters {
	if len(details.GetPayloads()) == 0 {
		return nil
	}
	var sc workflows.SessionCounters
	if err := converter.GetDefaultDataConverter().FromPayload(details.GetPayloads()[0], &sc); err != nil {
		return nil
	}
	return &sc
}

func timeOf(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func statusName(s enumspb.WorkflowExecutionStatus) string {
	switch s {
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return StatusRunning
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		return StatusCompleted
	case enumspb.WORKFLOW_EXECUTION_STATUS_FAILED:
		return StatusFailed
	case enumspb.WORKFLOW_EXECUTION_STATUS_CANCELED:
		return StatusCanceled
	case enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED:
		return StatusTerminated
	case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
		return StatusContinuedAsNew
	case enumspb.WORKFLOW_EXECUTION_STATUS_TIMED_OUT:
		return StatusTimedOut
	}
	return "Unknown"
}

func activityStateName(s enumspb.PendingActivityState) string {
	switch s {
	case enumspb.PENDING_ACTIVITY_STATE_SCHEDULED:
		return "Scheduled"
	case enumspb.PENDING_ACTIVITY_STATE_STARTED:
		return "Started"
	case enumspb.PENDING_ACTIVITY_STATE_CANCEL_REQUESTED:
		return "CancelRequested"
	case enumspb.PENDING_ACTIVITY_STATE_PAUSED, enumspb.PENDING_ACTIVITY_STATE_PAUSE_REQUESTED:
		return "Paused"
	}
	return "Unknown"
}

package systest_test

// Integration tests of the campaign workflow driven from outside
// (the real `temporal` CLI, worker processes killed with SIGKILL, the scale
// update) against a real Temporal dev server, RabbitMQ and kfake.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ctSchedulerSessions is the number of fetcher sessions the scheduler has
// open for campaign id.
func ctSchedulerSessions(s *stack, id string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := s.temporal.Client().QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return 0, err
	}
	var wst workflows.Status
	if err := v.Get(&wst); err != nil {
		return 0, err
	}
	if wst.Frontier == "" {
		return 0, fmt.Errorf("campaign %s reports no frontier key", id)
	}
	st, err := s.sched.Server().Stats(wst.Frontier)
	return st.Sessions, err
}

// ctSchedulerSessionsAre says whether the scheduler has n fetcher sessions
// of campaign id open, and if not how many it has.
func ctSchedulerSessionsAre(s *stack, id string, n int64) error {
	got, err := ctSchedulerSessions(s, id)
	if err == nil && got != n {
		err = fmt.Errorf("%d sessions open", got)
	}
	return err
}

// ctCheckLanded reads the stack's Kafka topic and fails the test for every
// page of the web with no record there, or one whose body differs from
// what the server sent: the sink's side of "every page fetched".
func ctCheckLanded(t *testing.T, s *stack, web *testweb.Web) {
	t.Helper()
	got := map[string]int{}
	for _, m := range readTopic(t, s.kafka.Addr(), s.topic, len(web.Pages())) {
		got[string(m.Key)]++
		if body, ok := web.Body(string(m.Key)); ok {
			assert.True(t, bytes.Equal(body, m.Value), "record of %s differs from what the server sent", m.Key)
		}
	}
	var lost []string
	for _, u := range web.Pages() {
		if got[u] == 0 {
			lost = append(lost, u)
		}
	}
	if len(lost) > 0 {
		assert.Failf(t, "pages never landed in Kafka", "%d of %d pages never landed in Kafka, e.g. %v", len(lost), len(web.Pages()), lost[:min(5, len(lost))])
	}
}

// ctAtLeastRequested says whether the web served at least n distinct
// pages, and if not how many it did.
func ctAtLeastRequested(web *testweb.Web, n int) error {
	if got := ctPagesRequested(web); got < n {
		return fmt.Errorf("%d pages requested", got)
	}
	return nil
}

// ctPagesRequested counts the distinct non-robots.txt URLs the web served.
func ctPagesRequested(web *testweb.Web) int {
	seen := map[string]bool{}
	for _, r := range web.Requests() {
		if u, err := url.Parse(r.URL); err == nil && u.Path == "/robots.txt" {
			continue
		}
		seen[r.URL] = true
	}
	return len(seen)
}

func ctQueryStatus(t *testing.T, c client.Client, id string) (workflows.Status, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var st workflows.Status
	v, err := c.QueryWorkflow(ctx, id, "", workflows.QueryStatus)
	if err != nil {
		return st, err
	}
	return st, v.Get(&st)
}

// ctStartedSessions returns the FetchSession activities pending in state
// STARTED, by the identity of the worker that runs them.
func ctStartedSessions(t *testing.T, c client.Client, id string) (map[string]int, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return nil, 0, err
	}
	d := desc.RawResponse
	by := map[string]int{}
	n := 0
	for _, pa := range d.GetPendingActivities() {
		if pa.GetActivityType().GetName() == "FetchSession" && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			by[pa.GetLastWorkerIdentity()]++
			n++
		}
	}
	return by, n, nil
}

// ctPendingSessions counts the FetchSession activities pending in any state
// (a cancelled one stays pending until it returns).
func ctPendingSessions(t *testing.T, c client.Client, id string) (int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	desc, err := c.DescribeWorkflow(ctx, id, "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pa := range desc.RawResponse.GetPendingActivities() {
		if pa.GetActivityType().GetName() == "FetchSession" {
			n++
		}
	}
	return n, nil
}

// ctTemporalCLI runs bin/temporal with args against the stack's server.
func ctTemporalCLI(t *testing.T, s *stack, args ...string) {
	t.Helper()
	bin, err := devstack.TemporalBinary()
	require.NoError(t, err)
	args = append(args, "--address", s.temporal.Address(), "--namespace", s.temporal.Namespace())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	require.NoError(t, err, "temporal %s\n%s", strings.Join(args, " "), out)
}

// ctCheckHistory fetches a finished campaign's history, replays it against
// the Campaign workflow as built now (a non-determinism fails the test),
// and with DROVER_RECORD_HISTORY=1 writes it to workflows/testdata/record,
// which TestReplayRecordedHistory replays from then on.
func ctCheckHistory(t *testing.T, c client.Client, id, runID, record string) *historypb.History {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := &historypb.History{}
	it := c.GetWorkflowHistory(ctx, id, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		require.NoError(t, err, "history of %s", id)
		h.Events = append(h.Events, ev)
	}
	r := worker.NewWorkflowReplayer()
	r.RegisterWorkflowWithOptions(workflows.Campaign, workflow.RegisterOptions{Name: workflows.WorkflowName})
	if !assert.NoError(t, r.ReplayWorkflowHistory(nil, h), "replaying the history of %s (%d events)", id, len(h.Events)) {
		return h
	}
	t.Logf("history of %s: %d events, replays", id, len(h.Events))
	if os.Getenv("DROVER_RECORD_HISTORY") != "1" {
		return h
	}
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  "}.Marshal(h)
	require.NoError(t, err)
	root, err := devstack.RepoRoot(".")
	require.NoError(t, err)
	path := filepath.Join(root, "workflows", "testdata", record)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	t.Logf("recorded %s", path)
	return h
}

// ctSessionEnds counts how the history's FetchSessions ended: completed
// (ended through their scheduler, EndSessions) or cancelled (the
// cancellation reached them on a heartbeat response first).
func ctSessionEnds(h *historypb.History) (completed, canceled int) {
	fetch := map[int64]bool{}
	for _, ev := range h.Events {
		if a := ev.GetActivityTaskScheduledEventAttributes(); a != nil && a.GetActivityType().GetName() == workflows.FetchSessionActivity {
			fetch[ev.GetEventId()] = true
		}
		if a := ev.GetActivityTaskCompletedEventAttributes(); a != nil && fetch[a.GetScheduledEventId()] {
			completed++
		}
		if a := ev.GetActivityTaskCanceledEventAttributes(); a != nil && fetch[a.GetScheduledEventId()] {
			canceled++
		}
	}
	return completed, canceled
}

func ctStartCampaign(t *testing.T, c client.Client, cfg campaign.Config) client.WorkflowRun {
	t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: cfg.ID, TaskQueue: workflows.TaskQueue,
	}, workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	require.NoError(t, err)
	return run
}

// ctResult waits (bounded) for the campaign's final status.
// ctHoldAPage holds the web's page bodies half-sent (released at the end
// of the test, if not before) and waits until one is held: a fault from
// here on finds a fetch in the middle of a body.
func ctHoldAPage(t *testing.T, web *testweb.Web) {
	t.Helper()
	web.HoldBodies()
	t.Cleanup(web.ReleaseBodies)
	await.For(t, 30*time.Second, 5*time.Millisecond, "a page held in the middle of its body", func() error {
		if web.Held() == 0 {
			return errors.New("no page held")
		}
		return nil
	})
}

// ctFrontierKey is the frontier key of the running campaign id (ID~RUN),
// as its workflow says.
func ctFrontierKey(t *testing.T, c client.Client, id string) string {
	t.Helper()
	wst, err := ctQueryStatus(t, c, id)
	require.NoError(t, err, "the campaign's frontier key")
	require.NotEmpty(t, wst.Frontier, "the campaign's frontier key")
	return wst.Frontier
}

func ctResult(t *testing.T, run client.WorkflowRun, timeout time.Duration) workflows.Status {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var st workflows.Status
	require.NoError(t, run.Get(ctx, &st), "campaign %s", run.GetID())
	return st
}

// pauseTakesEffectWithin bounds the time from the pause signal to a fleet
// stopped (no FetchSession pending, no session at the scheduler): a
// workflow task, EndSessions reaching each session through the scheduler
// (or the cancellation, on a heartbeat response within the 5 s throttle),
// its fetches cancelled, its leases released and its session closed. It
// takes well under a second; the bound leaves room for -race on 2 busy
// cores.
const pauseTakesEffectWithin = 30 * time.Second

// pausedQuietFor is how long a paused campaign is watched for a request:
// many times the per-host delay (20 ms) at which a fetcher left running
// would start one.
const pausedQuietFor = 5 * time.Second

// TestPauseWithTemporalCLI pauses a running campaign with the real
// `temporal workflow signal`, waits for the fleet to stop, and checks on
// the server's side that no request starts while it stays paused; resumed
// the same way, the campaign completes with every page stored in Kafka
// (a URL cancelled by the pause must be fetched again, not lost).
func TestPauseWithTemporalCLI(t *testing.T) {
	// Pages are held half-sent while the pause is sent (HoldBodies), so
	// that it catches fetches under way: each must be fetched again, not
	// lost.
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 150, PageBytes: 64 << 10, CrossHost: true, Base: 50})
	s := startStack(t)
	c := s.temporal.Client()
	cfg := s.newCampaign("pause", web, 2)
	cfg.PerHostDelay = new(20 * time.Millisecond)
	total := len(web.Pages())
	run := ctStartCampaign(t, c, cfg)

	await.For(t, 2*time.Minute, 10*time.Millisecond, "20% of the pages fetched", func() error {
		return ctAtLeastRequested(web, total/5)
	})
	// Pages are held half-sent from now until the fleet has stopped, so
	// that the pause certainly cancels fetches in the middle of a body.
	ctHoldAPage(t, web)
	heldAtPause := web.Held()
	sent := time.Now()
	ctTemporalCLI(t, s, "workflow", "signal", "--workflow-id", cfg.ID, "--name", workflows.SignalPause)
	signalled := time.Now()
	atPause := ctPagesRequested(web)
	t.Logf("pause sent at %d/%d pages; the CLI took %s", atPause, total, signalled.Sub(sent).Round(time.Millisecond))

	var st workflows.Status
	quiet := await.For(t, pauseTakesEffectWithin, 50*time.Millisecond, "paused, with no FetchSession pending and no session at the scheduler", func() error {
		var err error
		st, err = ctQueryStatus(t, c, cfg.ID)
		if err != nil {
			return err
		}
		require.NotEqual(t, campaign.StateCompleted, st.State, "the campaign completed before the pause: make the web bigger or slower")
		if st.State != campaign.StatePaused || st.FetchersActive != 0 {
			return fmt.Errorf("state %s, %d fetchers active", st.State, st.FetchersActive)
		}
		pending, err := ctPendingSessions(t, c, cfg.ID)
		if err != nil || pending > 0 {
			return fmt.Errorf("%d FetchSession pending (%v)", pending, err)
		}
		open, err := ctSchedulerSessions(s, cfg.ID)
		if err != nil || open > 0 {
			return fmt.Errorf("%d sessions at the scheduler (%v)", open, err)
		}
		return nil
	})
	nreqs := len(web.Requests())
	t.Logf("paused, fleet stopped %s after the signal; %d pages were held in their body at the pause, %d still are", quiet.Sub(signalled).Round(time.Millisecond), heldAtPause, web.Held())
	web.ReleaseBodies()
	await.Holds(t, pausedQuietFor, 100*time.Millisecond, "paused with no fetcher and no request", func() error {
		st, err := ctQueryStatus(t, c, cfg.ID)
		if err != nil || st.State != campaign.StatePaused || st.FetchersActive != 0 {
			return fmt.Errorf("while paused: state %s, %d fetchers active (%v); want paused, 0", st.State, st.FetchersActive, err)
		}
		if reqs := web.Requests(); len(reqs) > nreqs {
			r := reqs[nreqs]
			return fmt.Errorf("request %s started %s after the fleet stopped (paused campaign)", r.URL, r.Start.Sub(quiet).Round(time.Millisecond))
		}
		return nil
	})
	reqs := web.Requests()
	last := reqs[len(reqs)-1].Start
	for _, r := range reqs {
		if r.Start.After(last) {
			last = r.Start
		}
	}
	t.Logf("pause -> last request start: %s (%d pages fetched at the pause, %d when paused; %d requests in all)",
		last.Sub(signalled).Round(time.Millisecond), atPause, ctPagesRequested(web), len(reqs))
	require.Less(t, ctPagesRequested(web), total, "every page was fetched before the pause took effect: the test proves nothing")

	ctTemporalCLI(t, s, "workflow", "signal", "--workflow-id", cfg.ID, "--name", workflows.SignalResume)
	final := ctResult(t, run, 3*time.Minute)
	require.Equal(t, campaign.StateCompleted, final.State, "campaign state (%s)", final.Reason)
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}
	ctCheckLanded(t, s, web)
	t.Logf("completed: %d pages, %d duplicates", ctPagesRequested(web), len(web.Duplicates()))
	h := ctCheckHistory(t, c, cfg.ID, run.GetRunID(), "campaign_history.json")
	// The pause and the end reached the sessions through the scheduler
	// (EndSessions): they completed, instead of waiting up to the
	// heartbeat throttle (temporalnode.HeartbeatThrottle) for their cancellation.
	// A heartbeat response may win the race now and then, so one such
	// end is the proof.
	completed, canceled := ctSessionEnds(h)
	t.Logf("FetchSessions: %d ended through the scheduler, %d by their cancellation", completed, canceled)
	assert.NotZero(t, completed, "no FetchSession ended through its scheduler (%d cancelled): pause and stop waited for heartbeats", canceled)
}

// restartWithin bounds the time from the SIGKILL to the fleet whole again
// on the survivor: the dead sessions' 20 s heartbeat timeout, the
// workflow's 1 s restart backoff and a session's start, with room for
// -race on 2 busy cores.
const restartWithin = 90 * time.Second

// TestWorkerKilledMidCrawl runs a campaign on two worker processes and
// SIGKILLs the one running the most fetchers at about 20% of the crawl:
// Temporal times its sessions out, the workflow must start them again on
// the survivor (and count the restarts) while the crawl goes on, and the
// campaign completes with every page requested and landed in Kafka.
func TestWorkerKilledMidCrawl(t *testing.T) {
	testenv.Long(t) // two minutes: 1,600 pages, a worker process killed and restarted
	bin := filepath.Join(binaries(t), "worker")
	web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 400, CrossHost: true, Base: 51})
	s := startBareStack(t)
	c := s.temporal.Client()
	env := []string{
		"TEMPORAL_ADDRESS=" + s.temporal.Address(),
		"TEMPORAL_NAMESPACE=" + s.temporal.Namespace(),
		"DROVER_SCHEDULER=" + s.sched.Addr(),
		"KAFKA_BROKERS=" + s.kafka.Addr(),
		"DROVER_TOKEN=" + session.DevToken,
	}
	procs := map[string]*devstack.Proc{}
	for _, id := range []string{"worker-a", "worker-b"} {
		procs[id] = startProc(t, id, bin, []string{"-identity", id, "-metrics-addr", "127.0.0.1:0"}, env)
	}
	cfg := s.newCampaign("kill", web, 4)
	// Slow enough that the crawl outlasts the dead sessions' 20 s
	// heartbeat timeout, so that the fleet must come back: politeness
	// alone keeps the 80% left after the kill at 4 hosts x 6.7
	// pages/s, 48 s at least.
	cfg.PerHostDelay = new(150 * time.Millisecond)
	total := len(web.Pages())
	start := time.Now()
	run := ctStartCampaign(t, c, cfg)

	await.For(t, 3*time.Minute, 50*time.Millisecond, "20% of the pages fetched", func() error {
		return ctAtLeastRequested(web, total/5)
	})
	by, n, err := ctStartedSessions(t, c, cfg.ID)
	require.NoError(t, err)
	victim, survivor := "worker-a", "worker-b"
	if by["worker-b"] > by["worker-a"] {
		victim, survivor = survivor, victim
	}
	atKill := ctPagesRequested(web)
	t.Logf("at %d/%d pages after %s: %d sessions started %v; killing %s", atKill, total,
		time.Since(start).Round(time.Millisecond), n, by, victim)
	require.NotZero(t, by[victim], "no FetchSession on either worker at 20%%: %v", by)
	procs[victim].Kill()
	killed := time.Now()

	// The fleet must come back whole on the survivor, the restarts counted,
	// while the crawl goes on.
	restored := await.For(t, restartWithin, 250*time.Millisecond, fmt.Sprintf("the %d sessions of %s restarted on %s", by[victim], victim, survivor), func() error {
		st, err := ctQueryStatus(t, c, cfg.ID)
		if err != nil {
			return err
		}
		require.Equal(t, campaign.StateRunning, st.State, "campaign %s before the killed sessions were restarted (%d restarts): make the web bigger or slower", st.State, st.Restarts)
		now, _, err := ctStartedSessions(t, c, cfg.ID)
		if err != nil {
			return err
		}
		if now[survivor] != cfg.Fetchers || now[victim] != 0 || st.Restarts < by[victim] {
			return fmt.Errorf("sessions started by worker %v, %d restarts", now, st.Restarts)
		}
		return nil
	})
	t.Logf("fleet whole again on %s %s after the kill", survivor, restored.Sub(killed).Round(time.Millisecond))

	final := ctResult(t, run, 3*time.Minute)
	ended := time.Now()
	assert.True(t, procs[survivor].Alive(), "the surviving worker %s exited", survivor)
	require.Equal(t, campaign.StateCompleted, final.State, "state %s (%s), want completed", final.State, final.Reason)
	dups := web.Duplicates()
	t.Logf("killed %s at %d/%d pages; campaign completed %s after the kill (%s in all); %d restarts; %d URLs fetched more than once",
		victim, atKill, total, ended.Sub(killed).Round(time.Millisecond), ended.Sub(start).Round(time.Millisecond), final.Restarts, len(dups))
	assert.GreaterOrEqual(t, final.Restarts, by[victim], "%d restarts, want at least the %d sessions of the killed worker", final.Restarts, by[victim])
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}
	ctCheckLanded(t, s, web)
}

// TestScaleUp scales a one-fetcher campaign to 16 with the scale update,
// measures how long until the scheduler has 16 fetcher sessions of the
// campaign open (a FetchSession that started but never reached the
// scheduler fetches nothing), checks that the validator refuses nonsense,
// then stops the campaign and sees its sessions close.
func TestScaleUp(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 300, CrossHost: true, Base: 52})
	s := startStack(t)
	c := s.temporal.Client()
	cfg := s.newCampaign("scale", web, 1)
	cfg.PerHostDelay = new(200 * time.Millisecond)
	run := ctStartCampaign(t, c, cfg)
	await.For(t, time.Minute, 100*time.Millisecond, "one session at the scheduler", func() error {
		return ctSchedulerSessionsAre(s, cfg.ID, 1)
	})

	update := func(n int) (workflows.ScaleResult, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var res workflows.ScaleResult
		h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
			WorkflowID:   cfg.ID,
			UpdateName:   workflows.UpdateScale,
			Args:         []any{workflows.ScaleRequest{Fetchers: n}},
			WaitForStage: client.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			err = h.Get(ctx, &res)
		}
		return res, err
	}
	asked := time.Now()
	res, err := update(16)
	require.NoError(t, err, "scale to 16")
	accepted := time.Now()
	assert.Equal(t, workflows.ScaleResult{Previous: 1, Fetchers: 16}, res, "scale result")
	scaled := await.For(t, time.Minute, 50*time.Millisecond, "16 sessions at the scheduler", func() error {
		return ctSchedulerSessionsAre(s, cfg.ID, 16)
	})
	st, err := ctQueryStatus(t, c, cfg.ID)
	require.NoError(t, err)
	t.Logf("scale 1 -> 16: update completed in %s, 16 sessions at the scheduler %s after the update was sent; status: %d desired, %d active",
		accepted.Sub(asked).Round(time.Millisecond), scaled.Sub(asked).Round(time.Millisecond), st.FetchersDesired, st.FetchersActive)
	assert.Equal(t, 16, st.FetchersDesired, "status: fetchers desired")
	assert.Equal(t, 16, st.FetchersActive, "status: fetchers active")

	if _, err := update(-1); assert.Error(t, err, "scale to -1 was accepted") &&
		assert.ErrorContains(t, err, "must be between 0 and", "scale to -1: want the validator's message") {
		t.Logf("scale to -1 rejected: %v", err)
	}
	if st, err := ctQueryStatus(t, c, cfg.ID); assert.NoError(t, err, "status after the rejected update") {
		assert.Equal(t, 16, st.FetchersDesired, "after the rejected update: fetchers desired")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, c.SignalWorkflow(ctx, cfg.ID, "", workflows.SignalStop, workflows.StopSignal{Reason: "test done"}))
	final := ctResult(t, run, 2*time.Minute)
	require.Equal(t, campaign.StateStopped, final.State, "campaign state (%s)", final.Reason)
	assert.Less(t, ctPagesRequested(web), len(web.Pages()), "every page was fetched before the stop: the web is too small for this test")
	if _, n, err := ctStartedSessions(t, c, cfg.ID); assert.NoError(t, err, "after stop: sessions pending") {
		assert.Zero(t, n, "after stop: sessions still pending")
	}
	if n, err := ctSchedulerSessions(s, cfg.ID); assert.NoError(t, err, "after stop: sessions open at the scheduler") {
		assert.Zero(t, n, "after stop: sessions still open at the scheduler")
	}
}

package activities

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// slowScheduler is a scheduler's control session that takes delay to
// answer, as one does when Close waits for its pending records.
type slowScheduler struct {
	delay time.Duration
	calls atomic.Int32
}

func (s *slowScheduler) dial(context.Context, string, string) (ControlClient, error) { return s, nil }

func (s *slowScheduler) wait(ctx context.Context) error {
	s.calls.Add(1)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(s.delay):
		return nil
	}
}

func (s *slowScheduler) Seed(ctx context.Context, _ campaign.Config, urls []string) (int, error) {
	return len(urls), s.wait(ctx)
}

func (s *slowScheduler) AddSeeds(ctx context.Context, cfg campaign.Config, urls []string) (int, error) {
	return s.Seed(ctx, cfg, urls)
}

func (s *slowScheduler) CloseCampaign(ctx context.Context, id string, _ bool) (session.Stats, error) {
	return session.Stats{Campaign: id, Fetched: 7}, s.wait(ctx)
}

func (s *slowScheduler) Close() error { return nil }

// Seed, Close and Notify reported no heartbeat, so one
// that took longer than its heartbeat timeout (Close waiting on a busy
// scheduler) timed out and was retried while the first attempt still ran.
// Each runs here for more than twice its heartbeat timeout (wall time: the
// testsuite checks heartbeats on the real clock) and must succeed at its
// first attempt.
func TestSmallActivitiesOutliveTheirHeartbeatTimeout(t *testing.T) {
	testenv.Slow(t) // 10 s of wall time: heartbeat timeouts run on the real clock
	const heartbeat = 2 * time.Second
	const work = 5 * time.Second // > 2 × heartbeat
	cases := []struct {
		name string
		// calls: control requests one attempt makes (Close: a round to let
		// go, then one to delete).
		calls int32
		call  func(a *Activities, hook string, ctx workflow.Context) error
	}{
		{"Close", 2, func(a *Activities, hook string, ctx workflow.Context) error {
			var res workflows.CloseResult
			err := workflow.ExecuteActivity(ctx, a.Close, workflows.CloseInput{Config: campaign.Config{ID: "c1"}, Delete: true}).Get(ctx, &res)
			if err == nil && res.Stats.Fetched != 7 {
				return temporal.NewApplicationError("close result lost", "Test")
			}
			return err
		}},
		{"Seed", 1, func(a *Activities, hook string, ctx workflow.Context) error {
			return workflow.ExecuteActivity(ctx, a.Seed, workflows.SeedInput{Config: campaign.Config{ID: "c1", Seeds: []string{"http://a.test/"}}}).Get(ctx, nil)
		}},
		{"Notify", 1, func(a *Activities, hook string, ctx workflow.Context) error {
			return workflow.ExecuteActivity(ctx, a.Notify, workflows.NotifyInput{URL: hook, Text: "x"}).Get(ctx, nil)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sched := &slowScheduler{delay: work}
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = sched.wait(r.Context())
			}))
			defer hook.Close()
			a := &Activities{Schedulers: []string{"s1"}, DialControl: sched.dial}

			var s testsuite.WorkflowTestSuite
			env := s.NewTestWorkflowEnvironment()
			env.SetTestTimeout(time.Minute)
			env.RegisterActivity(a)
			env.RegisterWorkflowWithOptions(func(ctx workflow.Context) error {
				ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
					StartToCloseTimeout: time.Minute,
					HeartbeatTimeout:    heartbeat,
					RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 1},
				})
				return tc.call(a, hook.URL, ctx)
			}, workflow.RegisterOptions{Name: "call" + tc.name})
			env.ExecuteWorkflow("call" + tc.name)

			require.True(t, env.IsWorkflowCompleted())
			require.NoError(t, env.GetWorkflowError(), "%s outlived its heartbeat timeout: it must heartbeat while it works", tc.name)
			require.Equal(t, tc.calls, sched.calls.Load(), "one attempt")
		})
	}
}

func TestKeepAliveEvery(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{30 * time.Second, 5 * time.Second},
		{6 * time.Second, 2 * time.Second},
		{time.Millisecond, 100 * time.Millisecond},
	} {
		require.Equal(t, c.want, keepAliveEvery(c.timeout), "timeout %s", c.timeout)
	}
}

package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/seedfile"
)

// update sends Update name with arg at virtual time d; its result lands
// in res, a rejection in rejected.
func (h *harness) update(d time.Duration, name string, arg any, res any, rejected *error) {
	h.at(d, func() {
		h.env.UpdateWorkflow(name, "", &testsuite.TestUpdateCallback{
			OnAccept: func() {},
			OnReject: func(err error) { *rejected = err },
			OnComplete: func(v any, err error) {
				if !assert.NoError(h.t, err, "update %s", name) {
					return
				}
				if ev, ok := v.(converter.EncodedValue); ok {
					assert.NoError(h.t, ev.Get(res))
					return
				}
				b, err := json.Marshal(v)
				assert.NoError(h.t, err)
				assert.NoError(h.t, json.Unmarshal(b, res))
			},
		}, arg)
	})
}

// A list the workflow streams (SeedFile, 3 minutes here) holds the
// campaign open although Monitor finds the frontier drained from the
// first minute on; the Update returns the list's counts.
func TestSeedListHoldsTheCampaignOpen(t *testing.T) {
	h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
		env.OnActivity(acts.SeedFile, mock.Anything, mock.Anything).After(3 * time.Minute).Return(
			func(_ context.Context, in SeedFileInput) (seedfile.Counts, error) {
				if in.Source != "https://lists.example/s.gz" || in.Config.FrontierKey() == in.Config.ID {
					return seedfile.Counts{}, assert.AnError
				}
				return seedfile.Counts{Lines: 10, Seeded: 9, Known: 1}, nil
			})
	})
	h.drained.Store(true)
	var res, recorded SeedFileResult
	var rejected, rejectedEmpty error
	h.update(30*time.Second, UpdateSeed, SeedFileRequest{Source: "https://lists.example/s.gz"}, &res, &rejected)
	h.update(40*time.Second, UpdateSeed, SeedFileRequest{Source: "-", Streamed: &seedfile.Counts{Lines: 5, Seeded: 5}}, &recorded, &rejected)
	h.update(50*time.Second, UpdateSeed, SeedFileRequest{}, &res, &rejectedEmpty)
	start := h.env.Now()
	st := h.run(CampaignInput{Config: testConfig()})

	require.NoError(t, rejected)
	require.ErrorContains(t, rejectedEmpty, "give the seed list's source")
	require.Equal(t, campaign.StateCompleted, st.State)
	require.Equal(t, int64(9), res.Counts.Seeded)
	require.Equal(t, int64(5), recorded.SeedsAdded, "the streamed list recorded, without an activity")
	require.Equal(t, int64(14), res.SeedsAdded)
	require.Equal(t, int64(14), st.SeedsAdded, "in the status")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.closes, 1)
	require.GreaterOrEqual(t, h.closedAt.Sub(start), 3*time.Minute+30*time.Second, "closed while the list streamed")
}

// A live include the schedulers pushed to every running fetcher session
// leaves them running; when one could not take it (a worker or a
// scheduler from before pushed rules, or a scheduler not reached), every
// running session starts again with the new scope in its config, without
// counting a restart.
func TestIncludeRestartsOnlySessionsThatCannotTakeIt(t *testing.T) {
	cases := []struct {
		name     string
		out      RulesOutput
		err      error
		restarts bool
	}{
		{"pushed to every session", RulesOutput{Pushed: true}, nil, false},
		{"a session that does not take it", RulesOutput{Pushed: true, Stale: 1}, nil, true},
		{"a scheduler that cannot push", RulesOutput{Stale: 0}, nil, true},
		{"a scheduler not reached", RulesOutput{Pushed: true}, errors.New("scheduler 127.0.0.1:1 unreachable"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(env *testsuite.TestWorkflowEnvironment) {
				env.OnActivity(acts.SetRules, mock.Anything, mock.Anything).Return(c.out, c.err)
				env.OnActivity(acts.FetchSession, mock.Anything, mock.Anything).After(24 * time.Hour).Return(
					func(_ context.Context, in FetchSessionInput) (SessionCounters, error) {
						return SessionCounters{}, nil
					}).Maybe()
			})
			var completed, rejected error
			h.at(2*time.Minute, func() {
				h.env.UpdateWorkflow(UpdateRules, "", &testsuite.TestUpdateCallback{
					OnAccept:   func() {},
					OnReject:   func(err error) { rejected = err },
					OnComplete: func(_ any, err error) { completed = err },
				}, RulesRequest{Include: "^http://b[.]example/"})
			})
			h.at(5*time.Minute, func() { h.drained.Store(true) })
			st := h.run(CampaignInput{Config: testConfig()})

			require.Equal(t, campaign.StateCompleted, st.State)
			require.Zero(t, st.Restarts)
			require.NoError(t, rejected)
			if c.err != nil {
				require.ErrorContains(t, completed, "not every scheduler took them")
			} else {
				require.NoError(t, completed)
			}
			withInclude := 0
			h.mu.Lock()
			for _, r := range h.live {
				if slices.Contains(r.Include, "^http://b[.]example/") {
					withInclude++
				}
			}
			h.mu.Unlock()
			if !c.restarts {
				require.Zero(t, withInclude, "no session started again")
				require.Equal(t, 1, h.startsOf(0))
				require.Equal(t, 1, h.startsOf(1))
				return
			}
			require.Equal(t, 2, withInclude, "both fetchers started again with the include")
			require.Equal(t, 2, h.startsOf(0))
			require.Equal(t, 2, h.startsOf(1))
		})
	}
}

package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/workflows"
)

// seedQueue is a scheduler that queues each URL once (its queued marks)
// and goes away for good after failAfter batches (0: never).
type seedQueue struct {
	mu        sync.Mutex
	queued    map[string]int
	batches   int
	failAfter int
}

func (q *seedQueue) dial(context.Context, string, string) (ControlClient, error) { return q, nil }

func (q *seedQueue) Seed(ctx context.Context, cfg campaign.Config, urls []string) (int, error) {
	return q.AddSeeds(ctx, cfg, urls)
}

func (q *seedQueue) AddSeeds(_ context.Context, _ campaign.Config, urls []string) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.failAfter > 0 && q.batches >= q.failAfter {
		return 0, errors.New("scheduler gone")
	}
	q.batches++
	n := 0
	for _, u := range urls {
		if q.queued[u] == 0 {
			n++
		}
		q.queued[u]++
	}
	return n, nil
}

func (q *seedQueue) CloseCampaign(context.Context, string, bool) (session.Stats, error) {
	return session.Stats{}, nil
}

func (q *seedQueue) Close() error { return nil }

// An attempt of SeedFile that dies mid-list is retried from its last
// heartbeat: the retry sends no batch again, and the counts of the two
// attempts add up to the list, each seed queued once.
func TestSeedFileResumesFromItsHeartbeat(t *testing.T) {
	const n = 5000 // three batches of 2,000
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "http://a.example/%d\n", i)
	}
	list := filepath.Join(t.TempDir(), "seeds.txt")
	require.NoError(t, os.WriteFile(list, []byte(b.String()), 0o644))
	q := &seedQueue{queued: map[string]int{}, failAfter: 2}
	a := &Activities{Schedulers: []string{"s1"}, DialControl: q.dial}
	in := workflows.SeedFileInput{Config: campaign.Config{ID: "c1", Seeds: []string{"http://a.example/"}}, Source: list}

	var s testsuite.WorkflowTestSuite
	env := s.NewTestActivityEnvironment()
	env.RegisterActivity(a.SeedFile)
	var last seedfile.Counts
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, d converter.EncodedValues) {
		var c seedfile.Counts
		if d.HasValues() && d.Get(&c) == nil {
			last = c
		}
	})
	_, err := env.ExecuteActivity(a.SeedFile, in)
	require.ErrorContains(t, err, "scheduler gone")
	require.Equal(t, int64(4000), last.Lines, "the heartbeat has the first two batches")

	q.failAfter = 0 // the next attempt reaches a scheduler
	env = s.NewTestActivityEnvironment()
	env.RegisterActivity(a.SeedFile)
	env.SetHeartbeatDetails(last)
	v, err := env.ExecuteActivity(a.SeedFile, in)
	require.NoError(t, err)
	var c seedfile.Counts
	require.NoError(t, v.Get(&c))
	require.Equal(t, int64(n), c.Lines)
	require.Equal(t, int64(n), c.Seeded)
	require.Zero(t, c.Known, "no batch sent again")
	require.Len(t, q.queued, n)
	require.Equal(t, 3, q.batches)
}

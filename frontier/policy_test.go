package frontier

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type constPolicy float64

func (p constPolicy) Priority(Item) float64 { return float64(p) }

// A scheduler has the built-in policies and the ones of its own config, and
// refuses any other by name: there is no process-wide registry to drift.
func TestServerConfigPolicy(t *testing.T) {
	cfg := DefaultServerConfig()
	cfg.Policies = map[string]Policy{"news": constPolicy(7), "fair": constPolicy(9)}
	other := DefaultServerConfig()
	cases := []struct {
		cfg  ServerConfig
		name string
		want float64 // the policy's priority of an Item of depth 2
	}{
		{cfg, "bfs", -2},
		{cfg, "news", 7},
		{cfg, "fair", 9}, // a policy of its own wins over a built-in
		{other, "fair", 0},
	}
	for _, c := range cases {
		p, err := c.cfg.policy(c.name)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, p.Priority(Item{Depth: 2}), "%s: priority", c.name)
	}
	// Breadth-first: an asset of depth 2 after the pages of depth 1,
	// ahead of the pages of depth 2.
	bfs := BreadthFirst{}
	asset := bfs.Priority(Item{Depth: 2, Embed: true})
	assert.Less(t, asset, bfs.Priority(Item{Depth: 1}), "bfs: an embed of depth 2 at %v, pages of depth 1 at %v and 2 at %v", asset, bfs.Priority(Item{Depth: 1}), bfs.Priority(Item{Depth: 2}))
	assert.Greater(t, asset, bfs.Priority(Item{Depth: 2}), "bfs: an embed of depth 2 at %v, pages of depth 1 at %v and 2 at %v", asset, bfs.Priority(Item{Depth: 1}), bfs.Priority(Item{Depth: 2}))
	_, err := other.policy("news")
	require.ErrorIs(t, err, ErrUnknownPolicy, "news on a scheduler without it")
	const want = `priority "news": unknown priority policy (this scheduler has bfs, fair, score; a policy of your own goes in the scheduler's ServerConfig.Policies)`
	assert.EqualError(t, err, want)
}

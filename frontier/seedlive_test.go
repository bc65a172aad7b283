package frontier_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Seeds of a list that reach a scheduler after its campaign closed are
// refused, and its queues stay deleted: a late batch must not declare
// them again, where nothing would ever consume or delete them.
func TestSeedsAfterCloseAreRefused(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	ctl := control(t, sched.addr)
	cfg := newCampaign(t, fmt.Sprintf("t-seedlive-%d", rand.IntN(1e9)), []string{"http://a.test/"}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := ctl.Seed(ctx, cfg, cfg.Seeds)
	require.NoError(t, err, "seed")
	require.Equal(t, 1, n, "seed: URLs seeded")
	n, err = ctl.AddSeeds(ctx, cfg, []string{"http://a.test/1", "http://a.test/"})
	require.NoError(t, err, "add seeds while it runs")
	require.Equal(t, 1, n, "add seeds while it runs: new URLs; want 1 (the other is queued already)")
	_, err = ctl.CloseCampaign(ctx, cfg.ID, true)
	require.NoError(t, err)
	n, err = ctl.AddSeeds(ctx, cfg, []string{"http://a.test/2"})
	require.Error(t, err, "add seeds after the close: %d queued, want an error", n)
	t.Logf("refused: %v", err)
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclarePassive(frontier.Topology{Campaign: cfg.ID}.Shard(0), true, false, false, false, nil)
	assert.Error(t, err, "the closed campaign's shard queue exists again")
}

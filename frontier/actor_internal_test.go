package frontier

import (
	"log/slog"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Hole 7: once an actor has stopped, posting to it says so, every time: a
// caller that waits for its closure (serveFetcher, Server.Close) must never
// wait for one that will not run.
func TestHolePostToStoppedActor(t *testing.T) {
	srv := &Server{cfg: DefaultServerConfig(), log: slog.Default()}
	cfg := campaign.Config{ID: "actor-test", Seeds: []string{"http://127.0.0.1/"}}.WithDefaults()
	a, err := newCampaignActor(srv, cfg)
	require.NoError(t, err)
	a.stop(time.Second)
	ran := make(chan struct{}, 200)
	accepted := 0
	for range 200 {
		if a.post(func() { ran <- struct{}{} }) {
			accepted++
		}
	}
	time.Sleep(50 * time.Millisecond)
	assert.Zero(t, accepted, "posts of 200 a stopped actor accepted (%d ran)", len(ran))
}

package frontier_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
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
	if n, err := ctl.Seed(ctx, cfg, cfg.Seeds); err != nil || n != 1 {
		t.Fatalf("seed: %d, %v", n, err)
	}
	if n, err := ctl.AddSeeds(ctx, cfg, []string{"http://a.test/1", "http://a.test/"}); err != nil || n != 1 {
		t.Fatalf("add seeds while it runs: %d new, %v; want 1 (the other is queued already)", n, err)
	}
	if _, err := ctl.CloseCampaign(ctx, cfg.ID, true); err != nil {
		t.Fatal(err)
	}
	n, err := ctl.AddSeeds(ctx, cfg, []string{"http://a.test/2"})
	if err == nil {
		t.Fatalf("add seeds after the close: %d queued, want an error", n)
	}
	t.Logf("refused: %v", err)
	ch, err := sched.conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := ch.QueueDeclarePassive(frontier.Topology{Campaign: cfg.ID}.Shard(0), true, false, false, false, nil); err == nil {
		t.Error("the closed campaign's shard queue exists again")
	}
}

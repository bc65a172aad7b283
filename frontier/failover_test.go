package frontier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One of two schedulers dies mid-crawl (its RabbitMQ connection and its
// sessions cut at once, as a SIGKILL does) and stays down: the other takes
// its shards, the campaign drains by the drain rule with the dead one
// named as missing, and every page was fetched and stored.
func TestSchedulerGoneForGoodDoesNotHoldTheCampaign(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 6, PagesPerHost: 60, CrossHost: true, Base: 64})
	scheds := startReplicas(t, 2)
	addrs := addrsOf(scheds)
	cfg := testCampaign(t, web)
	t.Cleanup(func() {
		session.Client{Token: session.DevToken}.ReleaseCampaign(context.Background(), addrs[1:], cfg.ID)
	})
	ctl := control(t, addrs[1])
	_, err := ctl.Seed(context.Background(), cfg, cfg.Seeds)
	require.NoError(t, err)
	sk := sink.NewMemory()
	startFleet(t, cfg, addrs, sk, 4)
	waitCrawling(t, addrs, cfg.ID, 20)
	// The kill: the connection first, so nothing of s0 is settled by a
	// graceful close.
	scheds[0].conn.Close()
	scheds[0].srv.Close()

	st := waitDrained(t, addrs, cfg.ID, 3*time.Minute)
	checkCrawl(t, web, sk, false)
	assert.Equal(t, []string{addrs[0]}, st.Missing, "missing schedulers")
	t.Logf("drained with %v missing: %d fetched by the survivor, %d duplicates by the server's count", st.Missing, st.Fetched, len(web.Duplicates()))
}

// A scheduler cut off from the control sessions but alive, holding a URL,
// keeps the campaign from looking drained: RabbitMQ still counts its
// consumer.
func TestSchedulerCutOffButAliveKeepsTheCampaignOpen(t *testing.T) {
	scheds := startReplicas(t, 2)
	cfg := handCampaign(t, "http://127.66.30.1:9/")
	_, f := seedHand(t, scheds[0].addr, cfg)
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool { return true }) // held, not reported
	g := dialRawFetcher(t, scheds[1].addr, cfg)                                    // s1 consumes too, as a standby
	_ = g
	// s0 does not answer: its address is wrong in the list (a partition).
	addrs := []string{scheds[1].addr, "127.0.0.1:1"}
	var st session.Stats
	await.For(t, 10*time.Second, 50*time.Millisecond, "the two schedulers both consuming", func() error {
		var err error
		st, err = (session.Client{Token: session.DevToken}).CampaignStats(context.Background(), addrs, cfg.ID)
		require.NoError(t, err)
		if st.Consumers != 2 {
			return fmt.Errorf("stats %+v", st)
		}
		return nil
	})
	require.False(t, st.Idle(), "idle with a live scheduler holding a lease unreachable: %+v", st)
	require.Len(t, st.Missing, 1, "stats %+v", st)
	require.Zero(t, st.Queued, "stats %+v", st)
	require.Zero(t, st.Held, "stats %+v", st)
}

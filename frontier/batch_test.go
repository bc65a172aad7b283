package frontier_test

// Several URLs in one RabbitMQ message: each URL of a batch
// settles on its own, and the message is acked once, after the last; a
// scheduler gone with a batch half settled gets it back whole, and the
// URLs it settled are found done, not fetched again.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// leaseAll takes leases until it holds every URL of want (robots leases
// answered with a 404), and returns their lease IDs by URL.
func (f *rawFetcher) leaseAll(t *testing.T, want ...string) map[string]uint64 {
	t.Helper()
	got := map[string]uint64{}
	f.pages(t, len(want)+1, 20*time.Second, nil, func(l session.Lease) bool {
		got[l.URL] = l.ID
		return len(got) == len(want)
	})
	for _, u := range want {
		require.Contains(t, got, u, "leases %v, want %v", got, want)
	}
	return got
}

// batchOfLinks leases the campaign's one seed and reports it stored with
// links: the links of one host, new, go to their shard in one message.
func (f *rawFetcher) batchOfLinks(t *testing.T, ctl *session.Control, cfg campaign.Config, links ...string) {
	t.Helper()
	ids := f.leaseAll(t, cfg.Seeds[0])
	var ls []urlrule.Link
	for _, u := range links {
		ls = append(ls, urlrule.Link{URL: u})
	}
	f.report(t, session.Outcome{LeaseID: ids[cfg.Seeds[0]], Stored: true, Status: 200, Links: ls})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the seed recorded", func(st session.Stats) bool {
		return st.Fetched == 1 && st.Acked == 1 && st.Pending == 0
	})
}

// A batch of three URLs of one host, the links of one page: one fails for
// good (dead-lettered) and two are stored. While one is still out, the
// message is not acked; after the last, it is acked exactly once, and
// every URL settled once.
func TestBatchOneURLFailsForGoodOthersStored(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u1, u2, u3 := "http://127.66.40.1:9/a", "http://127.66.40.1:9/b", "http://127.66.40.1:9/c"
	cfg := handCampaign(t, "http://127.66.40.1:9/")
	cfg.MaxAttempts, cfg.PerHostConcurrency = 1, 3
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)

	f := dialRawFetcher(t, sched.addr, cfg)
	f.batchOfLinks(t, ctl, cfg, u1, u2, u3)
	ids := f.leaseAll(t, u1, u2, u3)
	f.report(t,
		session.Outcome{LeaseID: ids[u1], Stored: true, Status: 200},
		session.Outcome{LeaseID: ids[u2], Retry: true, Status: 503, Error: "503 for good"})
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "u1 stored, u2 dead-lettered", func(st session.Stats) bool {
		return st.Fetched == 2 && st.DeadLettered == 1 && st.Pending == 0
	})
	require.Equal(t, int64(1), st.Acked, "with u3 still leased the batch must stay unacked (and not back in its queue): %+v", st)
	require.Zero(t, st.Queued, "with u3 still leased the batch must stay unacked (and not back in its queue): %+v", st)
	require.NotZero(t, st.Held, "with u3 still leased the batch must stay unacked (and not back in its queue): %+v", st)
	f.report(t, session.Outcome{LeaseID: ids[u3], Stored: true, Status: 200})
	st = waitStats(t, ctl, cfg.ID, 10*time.Second, "everything settled", func(st session.Stats) bool {
		return st.Fetched == 3 && st.Held == 0 && st.Pending == 0
	})
	require.Equal(t, int64(2), st.Acked, "the seed's message and one of three URLs, settled: want 2 acks, 1 dead-lettered, nothing queued; %+v", st)
	require.Zero(t, st.Queued, "the seed's message and one of three URLs, settled: want 2 acks, 1 dead-lettered, nothing queued; %+v", st)
	require.Equal(t, int64(1), st.DeadQueued, "the seed's message and one of three URLs, settled: want 2 acks, 1 dead-lettered, nothing queued; %+v", st)
	require.Equal(t, int64(1), st.DeadLettered, "the seed's message and one of three URLs, settled: want 2 acks, 1 dead-lettered, nothing queued; %+v", st)
	require.Zero(t, st.Duplicates, "the seed's message and one of three URLs, settled: want 2 acks, 1 dead-lettered, nothing queued; %+v", st)
	require.Zero(t, st.AckFailed, "the seed's message and one of three URLs, settled: want 2 acks, 1 dead-lettered, nothing queued; %+v", st)
	require.Empty(t, st.ConsumeError, "the seed's message and one of three URLs, settled: want 2 acks, 1 dead-lettered, nothing queued; %+v", st)
	dead := getDead(t, sched.conn, cfg.ID, 1)
	var m struct {
		URL string `json:"u"`
	}
	if assert.NoError(t, json.Unmarshal(dead[0].Body, &m), "dead-letter queue holds %s", dead[0].Body) {
		assert.Equal(t, u2, m.URL, "dead-letter queue holds %s, want u2 alone", dead[0].Body)
	}
}

// A scheduler dies with a batch of four URLs half settled (two stored,
// two leased): the message comes back whole to the next scheduler, which
// finds the two stored ones done (no lease) and leases the other two.
func TestBatchHalfSettledRedeliveredWhole(t *testing.T) {
	store := seen.NewMemory()
	s1 := startScheduler(t, frontier.DefaultServerConfig(), store)
	us := []string{"http://127.66.41.1:9/a", "http://127.66.41.1:9/b", "http://127.66.41.1:9/c", "http://127.66.41.1:9/d"}
	cfg := handCampaign(t, "http://127.66.41.1:9/")
	cfg.PerHostConcurrency = len(us)
	ctl1 := control(t, s1.addr)
	seedCampaign(t, ctl1, cfg)

	f := dialRawFetcher(t, s1.addr, cfg)
	f.batchOfLinks(t, ctl1, cfg, us...)
	ids := f.leaseAll(t, us...)
	f.report(t,
		session.Outcome{LeaseID: ids[us[0]], Stored: true, Status: 200},
		session.Outcome{LeaseID: ids[us[1]], Stored: true, Status: 200})
	waitStats(t, ctl1, cfg.ID, 10*time.Second, "two stored", func(st session.Stats) bool {
		return st.Fetched == 3 && st.Pending == 0
	})
	// The kill: the RabbitMQ connection first, so nothing is settled by a
	// graceful close.
	s1.conn.Close()
	s1.srv.Close()

	s2 := startScheduler(t, frontier.DefaultServerConfig(), store)
	ctl := control(t, s2.addr)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := ctl.CloseCampaign(ctx, cfg.ID, true); err != nil {
			t.Logf("close campaign: %v", err)
		}
	})
	g := dialRawFetcher(t, s2.addr, cfg)
	again := g.leaseAll(t, us[2], us[3])
	assert.NotContains(t, again, us[0], "%s leased again after it was stored", us[0])
	g.report(t,
		session.Outcome{LeaseID: again[us[2]], Stored: true, Status: 200},
		session.Outcome{LeaseID: again[us[3]], Stored: true, Status: 200})
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "the rest stored", func(st session.Stats) bool {
		return st.Fetched == 2 && st.Held == 0 && st.Pending == 0
	})
	assert.Equal(t, int64(2), st.Duplicates, "the batch came back whole (2 found done, 1 ack), want so: %+v", st)
	assert.Equal(t, int64(1), st.Acked, "the batch came back whole (2 found done, 1 ack), want so: %+v", st)
	assert.Zero(t, st.Queued, "the batch came back whole (2 found done, 1 ack), want so: %+v", st)
}

// publishRaw publishes body to queue with headers, persistent, confirmed.
func publishRaw(t *testing.T, conn *amqp.Connection, queue string, body []byte, hdr amqp.Table) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.Confirm(false))
	dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: body, Headers: hdr,
	})
	require.NoError(t, err)
	require.True(t, dc.Wait(), "publish nacked")
}

// Old single-URL messages (no x-drover-batch header, as every scheduler
// before batches published them) and batches share a shard queue: every
// URL of both is leased.
func TestBatchMixedWithSingleURLMessages(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	seedURL := "http://127.66.42.1:9/"
	cfg := handCampaign(t, seedURL)
	cfg.PerHostConcurrency = 4
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	single, b1, b2 := "http://127.66.42.1:9/old", "http://127.66.42.1:9/new1", "http://127.66.42.1:9/new2"
	q := shardQueue(cfg, seedURL)
	publishRaw(t, sched.conn, q, []byte(`{"u":"`+single+`","d":1}`), nil)
	publishRaw(t, sched.conn, q, []byte(`{"b":[{"u":"`+b1+`","d":1},{"u":"`+b2+`","d":1}]}`), amqp.Table{"x-drover-batch": int32(2)})

	f := dialRawFetcher(t, sched.addr, cfg)
	ids := f.leaseAll(t, seedURL, single, b1, b2)
	var out []session.Outcome
	for _, id := range ids {
		out = append(out, session.Outcome{LeaseID: id, Stored: true, Status: 200})
	}
	f.report(t, out...)
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "all four stored", func(st session.Stats) bool {
		return st.Fetched == 4 && st.Held == 0 && st.Pending == 0
	})
	assert.Equal(t, int64(3), st.Acked, "three messages (seed, old single, batch of two): want 3 acks, none dead; %+v", st)
	assert.Zero(t, st.DeadLettered, "three messages (seed, old single, batch of two): want 3 acks, none dead; %+v", st)
	assert.Zero(t, st.Queued, "three messages (seed, old single, batch of two): want 3 acks, none dead; %+v", st)
}

// A campaign whose shards an earlier version declared (classic, with
// x-max-priority) and filled with single-URL messages is still declared
// and consumed by this version: a redeclare with other arguments would
// fail with PRECONDITION_FAILED.
func TestOldTopologyCampaignStillConsumed(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u1, u2 := "http://127.66.43.1:9/", "http://127.66.43.1:9/x"
	cfg := handCampaign(t, u1)
	cfg.PerHostConcurrency = 2
	topo := frontier.Topology{Campaign: cfg.ID}
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	for i := range frontier.Shards {
		_, err := ch.QueueDeclare(topo.Shard(i), true, false, false, false, amqp.Table{
			"x-max-priority": int32(9), "x-single-active-consumer": true,
		})
		require.NoError(t, err)
	}
	ch.Close()
	publishRaw(t, sched.conn, shardQueue(cfg, u2), []byte(`{"u":"`+u2+`","d":1}`), nil)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	f := dialRawFetcher(t, sched.addr, cfg)
	ids := f.leaseAll(t, u1, u2)
	f.report(t,
		session.Outcome{LeaseID: ids[u1], Stored: true, Status: 200},
		session.Outcome{LeaseID: ids[u2], Stored: true, Status: 200})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "both stored", func(st session.Stats) bool {
		return st.Fetched == 2 && st.Held == 0 && st.Queued == 0 && st.ConsumeError == ""
	})
}

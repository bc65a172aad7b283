package frontier_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
)

// rabbitmqctl runs the machine's rabbitmqctl (the broker at AMQP_URL).
func rabbitmqctl(args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "rabbitmqctl", append([]string{"-q"}, args...)...).CombinedOutput(); err != nil {
		return fmt.Errorf("rabbitmqctl %v: %w: %s", args, err, out)
	}
	return nil
}

// parkForRetry seeds a quorum campaign of one URL on sched, leases it and
// reports a 503: the URL is parked for its retry, in the 10 s park queue,
// its delivery acked once the park queue has it, and the park mover takes
// it from there at once and holds it. It returns when the mover holds it.
func parkForRetry(t *testing.T, sched *scheduler, u string) (campaign.Config, *session.Control, time.Time) {
	t.Helper()
	cfg := handCampaign(t, u)
	cfg.QueueType = frontier.QueueQuorum
	ctl, f := seedHand(t, sched.addr, cfg)
	ids := f.leaseAll(t, u)
	f.report(t, session.Outcome{LeaseID: ids[u], Retry: true, Status: 503, Error: "503 Service Unavailable"})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the URL parked, with the mover", func(st session.Stats) bool {
		return st.Held == 0 && st.Acked == 1 && st.ParkedMoving == 1 && st.Queued == 0
	})
	return cfg, ctl, time.Now()
}

// fetchAgain dials a fetcher of cfg and waits, within d, for the lease of
// u, which it reports stored; then the campaign reads idle.
func fetchAgain(t *testing.T, sched *scheduler, ctl *session.Control, cfg campaign.Config, u string, d time.Duration) {
	t.Helper()
	began := time.Now()
	f := dialRawFetcher(t, sched.addr, cfg)
	f.pages(t, 1, d, nil, func(l session.Lease) bool {
		require.Equal(t, u, l.URL, "lease")
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	t.Logf("leased again %s later", time.Since(began).Round(100*time.Millisecond))
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the URL stored", func(st session.Stats) bool {
		return st.Fetched == 1 && st.Idle()
	})
	moved, _ := frontier.ParkMoves(sched.srv, cfg.FrontierKey())
	assert.NotZero(t, moved, "the URL came back, but not by the park mover")
}

// A parked URL whose move back to its shard RabbitMQ refuses (every
// publish to its shard fails, on cue) stays with the scheduler's park
// mover, counted, with the frontier not idle, for as long as it is
// refused; once the shard takes it, it is fetched.
func TestParkedURLMoveRefusedStaysCounted(t *testing.T) {
	sched := startDialingScheduler(t, frontier.DefaultServerConfig())
	u := "http://127.66.78.2:9/"
	cfg, ctl, parkedAt := parkForRetry(t, sched, u)
	shard := shardQueue(cfg, u)
	var refusing atomic.Bool
	refusing.Store(true)
	frontier.SetPublishFault(sched.srv, func(exchange, key string) error {
		if exchange == "" && key == shard && refusing.Load() {
			return errors.New("refused on cue")
		}
		return nil
	})
	for end := parkedAt.Add(15 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := ctl.Stats(ctx, cfg.ID)
		cancel()
		require.NoError(t, err, "%s after the park, its move refused: the mover should hold the URL, counted: %+v", time.Since(parkedAt).Round(time.Second), st)
		require.False(t, st.Idle(), "%s after the park, its move refused: the mover should hold the URL, counted: %+v", time.Since(parkedAt).Round(time.Second), st)
		require.Equal(t, int64(1), st.ParkedMoving, "%s after the park, its move refused: the mover should hold the URL, counted: %+v", time.Since(parkedAt).Round(time.Second), st)
	}
	moved, refused := frontier.ParkMoves(sched.srv, cfg.FrontierKey())
	require.Zero(t, moved, "park messages moved (%d moves refused): want none moved and the move refused (the test proves nothing)", refused)
	require.NotZero(t, refused, "moves refused (%d park messages moved): want none moved and the move refused (the test proves nothing)", moved)
	t.Logf("15 s after the park: the URL held by the mover, %d moves refused", refused)
	// `starter url` and `starter urls` see it: parked, due 10 s after the
	// park (the 10 s park queue), past now.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := ctl.URLState(ctx, cfg.FrontierKey(), u)
	if assert.NoError(t, err, "starter url of the parked URL") {
		assert.Equal(t, session.URLParked, st.State, "starter url of the parked URL: %+v", st)
		assert.WithinRange(t, st.ParkedUntil, parkedAt.Add(9*time.Second), parkedAt.Add(11*time.Second), "starter url of the parked URL: %+v; want parked until about %s", st, parkedAt.Add(10*time.Second).Format(time.TimeOnly))
	}
	page, err := ctl.URLs(ctx, cfg.FrontierKey(), session.URLQuery{Host: "127.66.78.2", State: session.URLParked, Limit: 10})
	if assert.NoError(t, err, "starter urls --state parked") {
		assert.Equal(t, []string{u}, page.URLs, "starter urls --state parked: %+v", page)
	}
	refusing.Store(false)
	fetchAgain(t, sched, ctl, cfg, u, 30*time.Second)
}

// A parked URL whose shard's leader does not answer when its wait ends
// (every shard's Raft server stopped, on the machine's RabbitMQ:
// rabbitmqctl eval, which needs root or the rabbitmq user; skipped
// without) is counted all along, and comes back once the shards do. The
// scheduler's consuming breaks with the shards, and its park mover with
// it: the URL goes back to its park queue, counted there, until the
// scheduler consumes again. Park queues that dead-lettered the URL back
// instead (RabbitMQ's at-least-once dead-lettering) held it in no queue's
// count and tried again only after dead_letter_worker_publisher_confirm_
// timeout, 3 minutes, or never, once their dead-letter worker was lost
// with a leader change.
func TestParkedURLComesBackWhenItsShardsDo(t *testing.T) {
	sched := startDialingScheduler(t, frontier.DefaultServerConfig())
	u := "http://127.66.78.1:9/"
	cfg, ctl, parkedAt := parkForRetry(t, sched, u)
	prefix := "drover." + cfg.FrontierKey() + ".s"
	shards := fmt.Sprintf(`[rabbit_quorum_queue:%%s(amqqueue:get_pid(Q)) || Q <- rabbit_amqqueue:list(), binary:longest_common_prefix([element(4, amqqueue:get_name(Q)), <<"%s">>]) == %d].`, prefix, len(prefix))
	if err := rabbitmqctl("eval", fmt.Sprintf(shards, "stop_server")); err != nil {
		t.Skipf("%v (the test stops the campaign's shard queues with rabbitmqctl, which needs root or the rabbitmq user)", err)
	}
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			assert.NoError(t, rabbitmqctl("eval", fmt.Sprintf(shards, "restart_server")), "restarting the shard queues")
		}
	}
	t.Cleanup(restart)
	// Past the wait: the drain rule (the Monitor's) never reads drained,
	// two idle readings a second apart with no ack or publish between.
	var prev *session.Stats
	for end := parkedAt.Add(20 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := ctl.Stats(ctx, cfg.ID)
		cancel()
		switch {
		case err != nil || !st.Idle():
			prev = nil
		case prev != nil && prev.Acked == st.Acked && prev.Published == st.Published:
			require.FailNowf(t, "the frontier reads drained", "the frontier reads drained with its one URL parked and not back: %+v", st)
		default:
			prev = &st
		}
	}
	restart()
	fetchAgain(t, sched, ctl, cfg, u, time.Minute)
}

// startDialingScheduler starts a scheduler over AMQP_URL's RabbitMQ that
// dials again when RabbitMQ closes its connection (as cmd/scheduler's).
func startDialingScheduler(t *testing.T, cfg frontier.ServerConfig) *scheduler {
	t.Helper()
	testenv.NeedsRabbitMQ(t)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := frontier.NewServerDial(cfg, func() (*amqp.Connection, error) { return amqp.Dial(amqpURL()) }, seen.NewMemory(), log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &scheduler{srv: srv, addr: ln.Addr().String()}
}

// A campaign started before the park movers has parking queues that
// expire their messages and dead-letter them back to the shards (and
// quorum shards without them): it is still declared as it was (a
// redeclare with the movers' arguments would fail with
// PRECONDITION_FAILED), its parked URLs carry the tokens the drain rule
// waits for, and they come back and are fetched.
func TestLegacyParkQueuesStillServed(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u := "http://127.66.78.3:9/"
	cfg := handCampaign(t, u)
	cfg.QueueType = frontier.QueueQuorum
	topo := frontier.Topology{Campaign: cfg.FrontierKey()}
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	quorum := amqp.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "balanced"}
	for i := range frontier.Shards {
		_, err := ch.QueueDeclare(topo.Shard(i), true, false, false, false, amqp.Table{
			"x-queue-type": "quorum", "x-queue-leader-locator": "balanced", "x-single-active-consumer": true, "x-delivery-limit": int64(1_000_000),
		})
		require.NoError(t, err)
	}
	_, err = ch.QueueDeclare(topo.Dead(), true, false, false, false, quorum)
	require.NoError(t, err)
	for i, ttl := range []time.Duration{time.Second, 10 * time.Second, time.Minute, 10 * time.Minute} {
		_, err := ch.QueueDeclare(topo.Park(i), true, false, false, false, amqp.Table{
			"x-queue-type": "quorum", "x-message-ttl": ttl.Milliseconds(),
			"x-dead-letter-exchange": "", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish",
		})
		require.NoError(t, err)
	}
	ch.Close()
	ctl, f := seedHand(t, sched.addr, cfg)
	ids := f.leaseAll(t, u)
	f.report(t, session.Outcome{LeaseID: ids[u], Retry: true, Status: 503, Error: "503 Service Unavailable"})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the URL parked, owed", func(st session.Stats) bool {
		return st.Held == 0 && st.Acked == 1 && st.ParkedOwed == 1
	})
	fetchAgain(t, sched, ctl, cfg, u, time.Minute)
	// The mover held the URL past its TTL: RabbitMQ expires no message a
	// consumer holds, so it did not come back twice.
	time.Sleep(2 * time.Second)
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "idle", session.Stats.Idle)
	assert.Zero(t, st.Duplicates, "the parked URL came back twice (the mover's move and RabbitMQ's dead-lettering): %+v", st)
}

// A park queue deleted by hand stops its own mover, which tries again,
// and no other: a URL parked in another park queue still comes back.
func TestParkMoverOutlivesADeletedParkQueue(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u := "http://127.66.78.4:9/"
	cfg := handCampaign(t, u)
	ctl, f := seedHand(t, sched.addr, cfg)
	ids := f.leaseAll(t, u)
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	gone := frontier.Topology{Campaign: cfg.FrontierKey()}.Park(frontier.ParkQueues() - 1)
	_, err = ch.QueueDelete(gone, false, false, false)
	require.NoError(t, err)
	ch.Close()
	f.report(t, session.Outcome{LeaseID: ids[u], Retry: true, Status: 503, Error: "503 Service Unavailable"})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the URL parked, with the mover", func(st session.Stats) bool {
		return st.Held == 0 && st.Acked == 1 && st.ParkedMoving == 1
	})
	fetchAgain(t, sched, ctl, cfg, u, time.Minute)
}

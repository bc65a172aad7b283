package frontier_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

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

// A parked URL whose hand-over back to its shard fails is in neither
// queue for RabbitMQ's counts: its park queue dead-lettered it (at-least-
// once), and RabbitMQ's dead-letter worker holds it until the shard takes
// it, retrying a refused hand-over only after
// dead_letter_worker_publisher_confirm_timeout (3 minutes by default).
// Meanwhile the frontier must not read drained: it would end the campaign
// and delete its queues, the parked URL with them. In a cluster, a quorum
// shard whose leader does not answer (a partition, its heal, an election)
// refuses the hand-over; here every shard's Raft server is stopped for
// the moment of the hand-over, on the machine's RabbitMQ (rabbitmqctl
// eval, which needs root or the rabbitmq user: skipped without).
func TestParkedURLHandedOverLateKeepsTheFrontierBusy(t *testing.T) {
	sched := startDialingScheduler(t, frontier.DefaultServerConfig())
	u := "http://127.66.78.1:9/"
	cfg := handCampaign(t, u)
	cfg.QueueType = frontier.QueueQuorum
	ctl, f := seedHand(t, sched.addr, cfg)
	ids := f.leaseAll(t, u)

	// The fetch failed (a 503): the URL is parked for its retry, in the
	// 10 s park queue, and its delivery acked once the park queue has it.
	f.report(t, session.Outcome{LeaseID: ids[u], Retry: true, Status: 503, Error: "503 Service Unavailable"})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the URL parked", func(st session.Stats) bool {
		return st.Held == 0 && st.Queued == 1 && st.Acked == 1
	})
	parkedAt := time.Now()
	// Every shard's Raft server stops (the URL's shard among them), as a
	// leader that does not answer: when the park queue's TTL ends and it
	// dead-letters the URL (at-least-once), the hand-over is refused, and
	// RabbitMQ's dead-letter worker holds the URL, counted in no queue,
	// until it tries again.
	prefix := "drover." + cfg.FrontierKey() + ".s"
	shards := fmt.Sprintf(`[rabbit_quorum_queue:%%s(amqqueue:get_pid(Q)) || Q <- rabbit_amqqueue:list(), binary:longest_common_prefix([element(4, amqqueue:get_name(Q)), <<"%s">>]) == %d].`, prefix, len(prefix))
	if err := rabbitmqctl("eval", fmt.Sprintf(shards, "stop_server")); err != nil {
		t.Skipf("%v (the test stops the campaign's shard queues with rabbitmqctl, which needs root or the rabbitmq user)", err)
	}
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			if err := rabbitmqctl("eval", fmt.Sprintf(shards, "restart_server")); err != nil {
				t.Errorf("restarting the shard queues: %v", err)
			}
		}
	}
	t.Cleanup(restart)
	time.Sleep(time.Until(parkedAt.Add(15 * time.Second))) // the TTL, and the hand-over refused
	restart()
	// The drain rule (the Monitor's): two idle readings a second apart,
	// with no ack or publish between; a reading that fails is not idle.
	// A reading with the URL in no queue, not held and not leased shows
	// the refused hand-over hit it.
	var prev *session.Stats
	hidden := 0
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(time.Second) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		st, err := ctl.Stats(ctx, cfg.ID)
		cancel()
		if err == nil && st.Queued == 0 && st.Uncounted == 0 && st.Held == 0 && st.InFlight == 0 && st.Fetched == 0 {
			hidden++
		}
		switch {
		case err != nil || !st.Idle():
			prev = nil
		case prev != nil && prev.Acked == st.Acked && prev.Published == st.Published:
			t.Fatalf("the frontier reads drained with its one URL parked and not back: %+v", st)
		default:
			prev = &st
		}
	}
	if hidden == 0 {
		t.Fatal("the parked URL was never out of every count (queued, held, leased): the hand-over was not refused, and the test proves nothing")
	}
	t.Logf("%d readings with the parked URL in no queue, not held, not leased; the frontier not idle", hidden)
	t.Run("and comes back", func(t *testing.T) {
		testenv.Long(t) // RabbitMQ's confirm timeout: 3 minutes
		// The first fetcher went quiet, and its session ended.
		f := dialRawFetcher(t, sched.addr, cfg)
		f.pages(t, 1, 5*time.Minute, nil, func(l session.Lease) bool {
			if l.URL != u {
				t.Fatalf("lease of %s, want %s", l.URL, u)
			}
			f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
			return true
		})
		waitStats(t, ctl, cfg.ID, 10*time.Second, "the URL stored", func(st session.Stats) bool {
			return st.Fetched == 1 && st.Idle()
		})
	})
}

// startDialingScheduler starts a scheduler over AMQP_URL's RabbitMQ that
// dials again when RabbitMQ closes its connection (as cmd/scheduler's).
func startDialingScheduler(t *testing.T, cfg frontier.ServerConfig) *scheduler {
	t.Helper()
	testenv.NeedsRabbitMQ(t)
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := frontier.NewServerDial(cfg, func() (*amqp.Connection, error) { return amqp.Dial(amqpURL()) }, seen.NewMemory(), log)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return &scheduler{srv: srv, addr: ln.Addr().String()}
}

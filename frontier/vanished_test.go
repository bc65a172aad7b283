package frontier_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockedBuffer is a bytes.Buffer a logger and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A shard queue of a live campaign that vanishes from RabbitMQ (deleted
// by hand here; a node lost for good does the same) took its URLs with
// it. The scheduler must say so in its log, in the campaign's stats and in
// the failure records, whether it notices while consuming (its consumer
// cancelled) or when it starts on the campaign (a restart, another
// scheduler); then the queue is there again for the rest of the crawl.
// Before, it was declared again, empty, without a word.
func TestHoleVanishedShardQueueIsTold(t *testing.T) {
	testenv.NeedsRabbitMQ(t) // each case starts a scheduler: skip the test, not only its cases
	for _, when := range []string{"consuming", "at start"} {
		t.Run(when, func(t *testing.T) {
			logs := &lockedBuffer{}
			sched := startSchedulerWith(t, frontier.DefaultServerConfig(), seen.NewMemory(),
				slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})))
			// Two hosts on different shards; the second's shard will vanish.
			keep := "http://127.66.50.1:9/a"
			var gone string
			for i := 2; gone == ""; i++ {
				u := fmt.Sprintf("http://127.66.50.%d:9/a", i)
				if shardOfURL(t, u) != shardOfURL(t, keep) {
					gone = u
				}
			}
			cfg := handCampaign(t, keep, gone)
			queue := shardQueue(cfg, gone)
			ctl := control(t, sched.addr)
			seedCampaign(t, ctl, cfg)
			// deleteQueue deletes the queue with its seed: ready (want 1) or
			// held by the scheduler, unacked (RabbitMQ counts 0 then).
			deleteQueue := func(want int) {
				ch, err := addrsConn(t).Channel()
				require.NoError(t, err)
				n, err := ch.QueueDelete(queue, false, false, false)
				require.NoError(t, err, "deleting %s", queue)
				require.Equal(t, want, n, "deleting %s: messages ready", queue)
				ch.Close()
			}
			var f *rawFetcher
			switch when {
			case "consuming":
				f = dialRawFetcher(t, sched.addr, cfg)
				waitStats(t, ctl, cfg.ID, 20*time.Second, "both seeds held", func(st session.Stats) bool { return st.Held == 2 })
				deleteQueue(0)
			case "at start":
				deleteQueue(1)
				f = dialRawFetcher(t, sched.addr, cfg)
			}
			st := waitStats(t, ctl, cfg.ID, 20*time.Second, "the vanished queue in the stats", func(st session.Stats) bool {
				return len(st.Vanished) > 0
			})
			assert.Equal(t, []string{queue}, st.Vanished, "stats: vanished (failed by %v)", st.FailedBy)
			assert.Equal(t, int64(1), st.FailedBy[session.ReasonVanished], "stats: failed by %v (vanished %v)", st.FailedBy, st.Vanished)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			fs, _, err := session.Client{Token: session.DevToken}.Failures(ctx, []string{sched.addr}, cfg.ID, session.ReasonVanished)
			if assert.NoError(t, err, "failure records of reason vanished") &&
				assert.Len(t, fs, 1, "failure records of reason vanished: %+v (want one for %s)", fs, queue) {
				assert.Equal(t, queue, fs[0].URL, "failure records of reason vanished: %+v", fs)
			}
			await.For(t, 5*time.Second, 20*time.Millisecond, "the log line", func() error {
				if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), queue) {
					return fmt.Errorf("no error naming %s in the log:\n%s", queue, logs.String())
				}
				return nil
			})
			// The rest of the crawl goes on: the other host's page is leased,
			// and the lost seed never is.
			f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
				require.NotEqual(t, gone, l.URL, "the seed of the vanished queue was leased: it was in no queue")
				f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
				return l.URL == keep
			})
			waitStats(t, ctl, cfg.ID, 20*time.Second, "the campaign drained", func(st session.Stats) bool {
				return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0 && st.Fetched == 1
			})
		})
	}
}

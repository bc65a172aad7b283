package systest_test

// A million seeds from a gzip list, added to a running (paused) campaign
// with `starter seed`: RabbitMQ's shard queues then hold each of them
// exactly once, read back message by message, and no event of the
// campaign's history is 64 KB or more. The campaign is paused, so that no
// scheduler consumes the shards while they are counted; crawling a million
// pages end to end would take longer than make test allows on two cores,
// so TestSeedListsIncludeAndSeedOverHTTP crawls a smaller list end to end.

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/workflows"
)

const millionSeeds = 1_000_000

// millionURL is seed i of the list: a thousand hosts, a thousand seeds each.
func millionURL(i int) string { return fmt.Sprintf("http://h%d.million.test/s/%d", i%1000, i) }

func writeMillionList(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	zw := gzip.NewWriter(f)
	bw := bufio.NewWriterSize(zw, 1<<20)
	for i := range millionSeeds {
		bw.WriteString(millionURL(i))
		bw.WriteByte('\n')
	}
	require.NoError(t, bw.Flush())
	require.NoError(t, zw.Close())
	require.NoError(t, f.Close())
}

func TestAMillionSeedsFromAGzipList(t *testing.T) {
	testenv.Long(t)
	s := startStack(t)
	c := s.temporal.Client()
	cfg := campaign.Config{
		ID:           fmt.Sprintf("million-%d", time.Now().UnixNano()),
		Seeds:        []string{"http://h0.million.test/"},
		Scope:        []string{`^http://h[0-9]+\.million\.test/`},
		Fetchers:     1,
		AllowPrivate: true,
		Sinks:        []string{"kafka://" + s.kafka.Addr() + "/" + s.topic},
	}
	// Paused from its start: the fleet never runs, and no scheduler
	// consumes the shards.
	_, err := c.SignalWithStartWorkflow(context.Background(), cfg.ID, workflows.SignalPause, workflows.PauseSignal{Reason: "counting seeds"},
		client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue}, workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	require.NoError(t, err)
	await.For(t, time.Minute, 100*time.Millisecond, "the campaign paused and seeded", func() error {
		st, err := ctQueryStatus(t, c, cfg.ID)
		if err != nil || st.State != campaign.StatePaused || st.Frontier == "" {
			return fmt.Errorf("state %q, frontier %q, %v", st.State, st.Frontier, err)
		}
		return nil
	})
	deleteQueuesAtEnd(t, ctFrontierKey(t, c, cfg.ID))
	list := filepath.Join(t.TempDir(), "million.gz")
	writeMillionList(t, list)
	fi, _ := os.Stat(list)

	starter := starterRunner(t, s.services, []string{s.sched.Addr()})
	began := time.Now()
	out, err := starter(15*time.Minute, "seed", cfg.ID, "--file", list, "--json")
	took := time.Since(began)
	require.NoError(t, err, "seed:\n%s", out)
	var res workflows.SeedFileResult
	require.NoError(t, json.Unmarshal([]byte(out), &res), "seed --json:\n%s", out)
	assert.Equal(t, int64(millionSeeds), res.Counts.Seeded, "seed: %+v, want %d lines and seeds queued", res.Counts, millionSeeds)
	assert.Equal(t, int64(millionSeeds), res.Counts.Lines, "seed: %+v, want %d lines and seeds queued", res.Counts, millionSeeds)
	t.Logf("%d seeds (%d bytes gzip) streamed in %s", res.Counts.Seeded, fi.Size(), took.Round(time.Millisecond))

	counts, others := countShardURLs(t, ctFrontierKey(t, c, cfg.ID))
	missing, twice := 0, 0
	for i, n := range counts {
		switch {
		case n == 0:
			missing++
			if missing <= 3 {
				assert.Failf(t, "seed in no shard queue", "%s is in no shard queue", millionURL(i))
			}
		case n > 1:
			twice++
			if twice <= 3 {
				assert.Failf(t, "seed queued more than once", "%s is queued %d times", millionURL(i), n)
			}
		}
	}
	t.Logf("the shard queues hold %d of the seeds once; %d missing, %d more than once; other URLs: %v", millionSeeds-missing-twice, missing, twice, others)
	assert.Equal(t, []string{cfg.Seeds[0]}, others, "other URLs in the shards: %v, want only the campaign's seed %s", others, cfg.Seeds[0])

	require.NoError(t, c.SignalWorkflow(context.Background(), cfg.ID, "", workflows.SignalStop, workflows.StopSignal{Reason: "counted"}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var st workflows.Status
	require.NoError(t, c.GetWorkflow(ctx, cfg.ID, "").Get(ctx, &st))
	h := ctCheckHistory(t, c, cfg.ID, "", "")
	n, what := largestEvent(h)
	_, inBytes := startedConfig(t, h)
	t.Logf("history: %d events, input %d bytes, largest event %d bytes (%s)", len(h.Events), inBytes, n, what)
	assert.Less(t, n, maxEventBytes, "largest event %d bytes (%s), want under %d", n, what, maxEventBytes)
}

// deleteQueuesAtEnd removes the queues of the campaign run key when the
// test ends, whatever ended it: a test that failed before its campaign
// closed must not leave a million URLs in the machine's RabbitMQ.
func deleteQueuesAtEnd(t *testing.T, key string) {
	t.Cleanup(func() {
		conn, err := amqp.Dial(amqpURL())
		if err != nil {
			t.Logf("deleting the queues of %s: %v", key, err)
			return
		}
		defer conn.Close()
		if err := (frontier.Topology{Campaign: key}).Delete(conn); err != nil {
			t.Logf("deleting the queues of %s: %v", key, err)
		}
	})
}

// countShardURLs consumes every message of the campaign key's shard
// queues (as many as RabbitMQ says each holds) and counts each seed of the
// million list; URLs not of the list are returned as they are.
func countShardURLs(t *testing.T, key string) (counts []uint8, others []string) {
	t.Helper()
	conn, err := amqp.Dial(amqpURL())
	require.NoError(t, err)
	defer conn.Close()
	counts = make([]uint8, millionSeeds)
	for i := range frontier.Shards {
		others = append(others, drainShard(t, conn, frontier.Topology{Campaign: key}.Shard(i), counts)...)
	}
	return counts, others
}

func drainShard(t *testing.T, conn *amqp.Connection, queue string, counts []uint8) (others []string) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
	// A classic shard; a passive declare that names no arguments
	// still matches it.
	require.NoError(t, err, "shard %s", queue)
	require.NoError(t, ch.Qos(2000, 0, false))
	ds, err := ch.Consume(queue, "", false, false, false, false, nil)
	require.NoError(t, err)
	timeout := time.After(2 * time.Minute)
	for got := 0; got < q.Messages; got++ {
		var d amqp.Delivery
		select {
		case d = <-ds:
		case <-timeout:
			require.FailNowf(t, "shard not drained", "shard %s: %d of its %d messages in 2 minutes", queue, got, q.Messages)
		}
		var one struct {
			URL   string `json:"u"`
			Batch []struct {
				URL string `json:"u"`
			} `json:"b"`
		}
		require.NoError(t, json.Unmarshal(d.Body, &one), "shard %s", queue)
		urls := []string{one.URL}
		if len(one.Batch) > 0 {
			urls = urls[:0]
			for _, b := range one.Batch {
				urls = append(urls, b.URL)
			}
		}
		for _, u := range urls {
			_, rest, ok := strings.Cut(u, ".million.test/s/")
			n, err := strconv.Atoi(rest)
			if !ok || err != nil || n < 0 || n >= millionSeeds || millionURL(n) != u {
				others = append(others, u)
				continue
			}
			counts[n]++
		}
		require.NoError(t, d.Ack(false))
	}
	return others
}

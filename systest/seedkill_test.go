package systest_test

// A seed list the workflow streams (SeedFile, from a URL) while its
// scheduler is SIGKILLed and started again on the same seen store: the
// activity's next attempt resumes after its last reported batch, every
// seed ends in the shard queues, and only the batch the kill interrupted
// can be there twice (a batch is published, then marked: a kill between
// the two has it sent again).

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/workflows"
)

const killSeeds = 300_000

// shardMessages is how many messages the shard queues of key hold.
func shardMessages(conn *amqp.Connection, key string) (int, error) {
	n := 0
	for i := range frontier.Shards {
		ch, err := conn.Channel()
		if err != nil {
			return 0, err
		}
		q, err := ch.QueueDeclarePassive(frontier.Topology{Campaign: key}.Shard(i), true, false, false, false, nil)
		ch.Close()
		if err != nil {
			return 0, err
		}
		n += q.Messages
	}
	return n, nil
}

func TestSeedListSurvivesASchedulerKill(t *testing.T) {
	testenv.Long(t)
	s := startServices(t)
	addr := freeAddr(t)
	seenPath := filepath.Join(t.TempDir(), "seen-0")
	sched := startSchedulerProc(t, addr, 0, 1, seenPath)
	startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())
	c := s.temporal.Client()
	cfg := campaign.Config{
		ID: fmt.Sprintf("seedkill-%d", time.Now().UnixNano()), Seeds: []string{"http://h0.million.test/"},
		Scope: []string{`^http://h[0-9]+\.million\.test/`}, Fetchers: 1, AllowPrivate: true,
		Sinks: []string{"kafka://" + s.kafka.Addr() + "/" + s.topic},
	}
	_, err := c.SignalWithStartWorkflow(context.Background(), cfg.ID, workflows.SignalPause, workflows.PauseSignal{Reason: "counting seeds"},
		client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue}, workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	require.NoError(t, err)
	var key string
	await.For(t, time.Minute, 100*time.Millisecond, "the campaign paused and seeded", func() error {
		st, err := ctQueryStatus(t, c, cfg.ID)
		if err != nil || st.State != campaign.StatePaused || st.Frontier == "" {
			return fmt.Errorf("state %q, frontier %q, %v", st.State, st.Frontier, err)
		}
		key = st.Frontier
		return nil
	})
	deleteQueuesAtEnd(t, key)
	list := filepath.Join(t.TempDir(), "seeds.gz")
	urls := make([]string, killSeeds)
	for i := range urls {
		urls[i] = millionURL(i)
	}
	body, err := os.ReadFile(gzipList(t, filepath.Dir(list), "seeds.gz", urls))
	require.NoError(t, err)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: cfg.ID, UpdateName: workflows.UpdateSeed, Args: []any{workflows.SeedFileRequest{Source: srv.URL + "/seeds.gz"}},
		WaitForStage: client.WorkflowUpdateStageAccepted,
	})
	require.NoError(t, err)
	conn, err := amqp.Dial(amqpURL())
	require.NoError(t, err)
	defer conn.Close()
	// A third of the list queued: the kill lands mid-stream.
	atKill := 0
	await.For(t, 5*time.Minute, 20*time.Millisecond, "a third of the list queued", func() error {
		n, err := shardMessages(conn, key)
		if err != nil || n < killSeeds/3/32 {
			return fmt.Errorf("%d messages, %v", n, err)
		}
		atKill = n
		return nil
	})
	sched.Kill()
	<-sched.Exited()
	startSchedulerProc(t, addr, 0, 1, seenPath)
	var res workflows.SeedFileResult
	require.NoError(t, h.Get(ctx, &res), "the seed update")
	counts, others := countShardURLs(t, key)
	missing, twice := 0, 0
	for i, n := range counts[:killSeeds] {
		if n == 0 {
			missing++
			if missing <= 3 {
				assert.Failf(t, "seed in no shard queue", "%s is in no shard queue", millionURL(i))
			}
		}
		if n > 1 {
			twice += int(n) - 1
		}
	}
	t.Logf("killed at %d messages; update: %+v; %d seeds missing, %d queued twice; others %v", atKill, res.Counts, missing, twice, others)
	// The list's first line is a comment.
	assert.Equal(t, int64(killSeeds+1), res.Counts.Lines, "counts %+v: want %d lines, a comment and %d seeds each seeded or known", res.Counts, killSeeds+1, killSeeds)
	assert.Equal(t, int64(killSeeds), res.Counts.Seeded+res.Counts.Known, "counts %+v: want %d lines, a comment and %d seeds each seeded or known", res.Counts, killSeeds+1, killSeeds)
	assert.LessOrEqual(t, twice, seedfile.DefaultBatch, "%d seeds queued twice: more than the one batch a kill interrupts (%d)", twice, seedfile.DefaultBatch)
	require.NoError(t, c.SignalWorkflow(context.Background(), cfg.ID, "", workflows.SignalStop, workflows.StopSignal{Reason: "counted"}))
	var st workflows.Status
	if assert.NoError(t, c.GetWorkflow(ctx, cfg.ID, "").Get(ctx, &st), "the campaign's end") {
		assert.Empty(t, st.CloseError, "the campaign's end: close error %q", st.CloseError)
	}
}

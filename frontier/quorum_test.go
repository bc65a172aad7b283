package frontier_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
)

// A campaign that asks for quorum shards gets them, on a scheduler whose
// default is classic, and is crawled through them; a scheduler whose
// default is quorum keeps a classic campaign's shards classic.
func TestQuorumShards(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u1, u2 := "http://127.66.77.1:9/", "http://127.66.77.1:9/x"
	cfg := handCampaign(t, u1, u2)
	cfg.QueueType = frontier.QueueQuorum
	cfg.PerHostConcurrency = 2
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
	topo := frontier.Topology{Campaign: cfg.FrontierKey()}
	for i := range frontier.Shards {
		require.Equal(t, frontier.QueueQuorum, queueType(t, sched.conn, topo.Shard(i)), "shard %d's queue type", i)
	}
	assert.Equal(t, frontier.QueueQuorum, queueType(t, sched.conn, topo.Dead()), "the dead-letter queue's type: not quorum, dead-lettered URLs would live on one node")

	quorumDefault := frontier.DefaultServerConfig()
	quorumDefault.QueueType = frontier.QueueQuorum
	sched2 := startScheduler(t, quorumDefault, seen.NewMemory())
	classic := handCampaign(t, "http://127.66.77.2:9/")
	classic.QueueType = frontier.QueueClassic
	seedCampaign(t, control(t, sched.addr), classic)
	plain := classic
	plain.QueueType = ""
	seedCampaign(t, control(t, sched2.addr), plain) // declares again: keeps them
	assert.Equal(t, frontier.QueueClassic, queueType(t, sched.conn, frontier.Topology{Campaign: classic.FrontierKey()}.Shard(0)), "a classic campaign's shard type after a quorum scheduler declared it")
}

// queueType says what RabbitMQ holds under a shard's or the dead-letter
// queue's name: a redeclare with the arguments drover gives a classic one
// succeeds only on a classic queue, and fails with PRECONDITION_FAILED on
// a quorum one.
func queueType(t *testing.T, conn *amqp.Connection, name string) string {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var classicArgs amqp.Table
	if !strings.HasSuffix(name, ".dead") {
		classicArgs = amqp.Table{"x-single-active-consumer": true}
	}
	_, err = ch.QueueDeclare(name, true, false, false, false, classicArgs)
	var aerr *amqp.Error
	switch {
	case err == nil:
		return frontier.QueueClassic
	case errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed && strings.Contains(aerr.Reason, "x-queue-type"):
		return frontier.QueueQuorum
	}
	require.FailNowf(t, "unknown queue type", "%s: %v", name, err)
	return ""
}

package systest_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/chaos"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// startRabbitCluster starts a three-node RabbitMQ cluster of the test's
// own (private nodes beside the machine's broker), stopped at the end.
func startRabbitCluster(t *testing.T) *chaos.RabbitCluster {
	t.Helper()
	testenv.NeedsCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, err := chaos.StartRabbitCluster(ctx, 3, os.Stderr)
	require.NoError(t, err)
	t.Cleanup(c.Stop)
	return c
}

// clusterStack is a stack whose scheduler's AMQP_URL names the three
// nodes of a private cluster, with in-process workers.
type clusterStack struct {
	cluster *chaos.RabbitCluster
	s       *stack
	sched   *node.Scheduler
}

func startClusterStack(t *testing.T) *clusterStack {
	cluster := startRabbitCluster(t)
	s := startBareStack(t)
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{AMQPURL: cluster.URL(), SeenPath: filepath.Join(t.TempDir(), "seen")})
	startWorkers(t, s.temporal.Client(), "test-worker", []string{sched.Addr()}, s.kafka.Addr())
	return &clusterStack{cluster: cluster, s: s, sched: sched}
}

// TestQuorumShardsOnACluster: a scheduler whose AMQP_URL names the three
// nodes of a cluster gives campaigns quorum shards by default, and they
// keep every URL through a lost quorum, a rolling restart, a partition,
// then a node lost for good (one cluster for all: it takes half a minute to form).
func TestQuorumShardsOnACluster(t *testing.T) {
	cs := startClusterStack(t)
	t.Run("quorum lost", func(t *testing.T) { quorumLost(t, cs) })
	t.Run("rolling restart", func(t *testing.T) { rollingRestart(t, cs) })
	t.Run("partition", func(t *testing.T) { partitionHealed(t, cs) })
	t.Run("a node lost for good", func(t *testing.T) { nodeLostForGood(t, cs) })
}

// clusterWeb is the test web of a cluster fault: 6 hosts of 200 pages,
// or, with DROVER_CLUSTER_PAGES=N (N of 6,000 or more), 20 hosts sharing
// N pages, for the crawl of a size an operator runs on a cluster.
func clusterWeb(base byte) testweb.Config {
	cfg := testweb.Config{Hosts: 6, PagesPerHost: 200, CrossHost: true, Base: base}
	if n, _ := strconv.Atoi(os.Getenv("DROVER_CLUSTER_PAGES")); n >= 6000 {
		cfg.Hosts, cfg.PagesPerHost = 20, n/20
	}
	return cfg
}

// clusterDelay is a fault's per-host delay, at most 100 ms on the larger
// web of clusterWeb (20 hosts of many pages outlast a fault at that pace).
func clusterDelay(d time.Duration) time.Duration {
	if n, _ := strconv.Atoi(os.Getenv("DROVER_CLUSTER_PAGES")); n >= 6000 {
		return min(d, 100*time.Millisecond)
	}
	return d
}

// rollingDownFor is how long each node stays stopped in rollingRestart.
const rollingDownFor = 20 * time.Second

// rollingRestart: each node of the cluster is stopped (stop_app) for
// rollingDownFor in turn, the scheduler's own first, while a crawl runs
// at a polite pace; the crawl goes on through every stop and completes
// with every page requested and stored.
func rollingRestart(t *testing.T, cs *clusterStack) {
	cluster, s := cs.cluster, cs.s
	web := webtest.Start(t, clusterWeb(156))
	c := s.temporal.Client()
	cfg := s.newCampaign("quorum-rolling", web, 4)
	cfg.PerHostDelay = new(clusterDelay(500 * time.Millisecond)) // 12 pages a second: the crawl outlasts the three stops
	run := ctStartCampaign(t, c, cfg)
	total := len(web.Pages())
	await.For(t, 2*time.Minute, 50*time.Millisecond, "a tenth of the crawl", func() error { return ctAtLeastRequested(web, total/10) })
	for _, n := range cluster.Nodes {
		before := ctPagesRequested(web)
		require.Less(t, before, total, "the crawl was over (%d of %d pages) before %s stopped: the restart proves nothing", before, total, n.Name)
		require.NoError(t, n.Ctl(context.Background(), "stop_app"), "stopping %s", n.Name)
		time.Sleep(rollingDownFor)
		during := ctPagesRequested(web) - before
		require.NoError(t, n.Ctl(context.Background(), "start_app"), "starting %s", n.Name)
		t.Logf("%s stopped for %s: %d pages requested meanwhile (%d of %d before)", n.Name, rollingDownFor, during, before, total)
		assert.NotZero(t, during, "no page requested while %s was stopped: two nodes should carry the crawl", n.Name)
	}
	checkCrawlWhole(t, s, web, run, time.Time{}, "")
}

// nodeLostForGood: in the middle of the crawl, with leases out and pages held half-sent, the
// node that leads the most shard queues is SIGKILLed and its data
// directory deleted, for good. The scheduler's connection moves to
// another node, the shards elect new leaders on the other two, and the
// campaign completes with every page requested and stored: none lost
// with the node.
func nodeLostForGood(t *testing.T, cs *clusterStack) {
	cluster, s, sched := cs.cluster, cs.s, cs.sched
	web := webtest.Start(t, clusterWeb(154))
	c := s.temporal.Client()
	cfg := s.newCampaign("quorum-loss", web, 4)
	cfg.PerHostDelay = new(50 * time.Millisecond)
	started := time.Now()
	run := ctStartCampaign(t, c, cfg)
	total := len(web.Pages())
	await.For(t, 2*time.Minute, 50*time.Millisecond, "a third of the crawl", func() error { return ctAtLeastRequested(web, total/3) })
	t.Logf("a third of the crawl in %s", time.Since(started).Round(100*time.Millisecond))
	key := ctFrontierKey(t, c, cfg.ID)
	// Held from before the leaders are looked up until the node is gone:
	// the loss finds fetches under way however long rabbitmqctl takes.
	ctHoldAPage(t, web)
	lost := leadingNode(t, cluster, "drover."+key+".s")
	st, _ := sched.Server().Stats(key)
	atFault, held := ctPagesRequested(web), web.Held()
	require.NoError(t, lost.Lose(), "losing %s", lost.Name)
	lostAt := time.Now()
	t.Logf("node %s lost with %d of %d pages requested, %d leases out, %d pages held mid-body", lost.Name, atFault, total, st.InFlight, held)
	require.NotZero(t, st.InFlight, "the loss hit no work in flight: %d leases out, %d of %d pages requested", st.InFlight, atFault, total)
	require.Less(t, atFault, total, "the loss hit no work in flight: %d leases out, %d of %d pages requested", st.InFlight, atFault, total)
	web.ReleaseBodies()
	await.For(t, 2*time.Minute, 100*time.Millisecond, "fetching to resume on the other nodes", func() error {
		if n := ctPagesRequested(web); n <= atFault+held {
			return fmt.Errorf("%d pages requested, %d at the loss", n, atFault)
		}
		return nil
	})
	t.Logf("fetching resumed %s after the loss", time.Since(lostAt).Round(100*time.Millisecond))
	checkCrawlWhole(t, s, web, run, lostAt, "the loss")
	replaceLostNode(t, cs, lost)
}

// replaceLostNode: an empty node stands in for lost, as an operator
// replaces a machine (forget_cluster_node, join_cluster, rabbitmq-queues
// grow); the next campaign's shard leaders spread over the three nodes,
// the new one included, and its crawl completes whole.
func replaceLostNode(t *testing.T, cs *clusterStack, lost *chaos.RabbitNode) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	began := time.Now()
	fresh, err := cs.cluster.Replace(ctx, lost, os.Stderr)
	require.NoError(t, err, "replacing %s", lost.Name)
	t.Logf("%s replaced by the empty %s in %s", lost.Name, fresh.Name, time.Since(began).Round(100*time.Millisecond))
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 60, Base: 158})
	c := cs.s.temporal.Client()
	cfg := cs.s.newCampaign("quorum-replaced", web, 4)
	cfg.PerHostDelay = new(100 * time.Millisecond) // 6 s at least: the leaders are read while it runs
	run := ctStartCampaign(t, c, cfg)
	by, err := cs.cluster.Leaders(ctx, "drover."+ctFrontierKey(t, c, cfg.ID)+".s")
	require.NoError(t, err)
	t.Logf("shard leaders by node after the replacement: %v", by)
	assert.NotZero(t, by[fresh.Name], "shard leaders on %v: want all three nodes, %s included", by, fresh.Name)
	assert.Len(t, by, 3, "shard leaders on %v: want all three nodes, %s included", by, fresh.Name)
	checkCrawlWhole(t, cs.s, web, run, time.Time{}, "")
}

// leadingNode is the cluster node that leads the most queues named with
// prefix (the campaign's shards): all of them, before the fault, are
// quorum queues with a leader.
func leadingNode(t *testing.T, c *chaos.RabbitCluster, prefix string) *chaos.RabbitNode {
	t.Helper()
	by, err := c.Leaders(context.Background(), prefix)
	require.NoError(t, err)
	var best string
	n := 0
	for name, k := range by {
		n += k
		if best == "" || k > by[best] {
			best = name
		}
	}
	require.Equal(t, 16, n, "%d shard queues with a quorum leader, want 16 (quorum shards by default on a cluster): %v", n, by)
	t.Logf("shard leaders by node: %v", by)
	node := c.Node(best)
	require.NotNil(t, node, "leader %q is no node of the cluster", best)
	return node
}

// checkCrawlWhole: the campaign of run completed, the server saw every
// page of web requested, and every page has a record in the stack's
// Kafka; it logs how long after since (when set, named by what) it
// completed, and the duplicate fetches.
func checkCrawlWhole(t *testing.T, s *stack, web *testweb.Web, run client.WorkflowRun, since time.Time, what string) {
	t.Helper()
	st := ctResult(t, run, 5*time.Minute)
	if !since.IsZero() {
		t.Logf("completed %s after %s", time.Since(since).Round(100*time.Millisecond), what)
	}
	require.Equal(t, "completed", st.State, "state %s (%s), want completed", st.State, st.Reason)
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, e.g. %v", len(m), m[:min(5, len(m))])
	}
	t.Logf("duplicate fetches: %d URLs", len(web.Duplicates()))
	checkStoredOnceAtLeast(t, s, web)
}

// checkStoredOnceAtLeast: every page of web has a record in the stack's
// Kafka topic.
func checkStoredOnceAtLeast(t *testing.T, s *stack, web *testweb.Web) {
	t.Helper()
	got := map[string]bool{}
	for _, m := range readTopic(t, s.kafka.Addr(), s.topic, len(web.Pages())) {
		got[string(m.Key)] = true
	}
	missing := 0
	for _, u := range web.Pages() {
		if !got[u] {
			missing++
		}
	}
	assert.Zero(t, missing, "%d of %d pages have no record in Kafka", missing, len(web.Pages()))
}

// quorumLostFor is how long two of the three nodes stay down in
// quorumLost.
const quorumLostFor = 20 * time.Second

// quorumLost: two of the cluster's three nodes stop
// (stop_app) in the middle of a crawl on quorum shards, with leases out:
// no queue has a quorum, so nothing is delivered, confirmed or acked.
// Fetching goes on through the URLs the scheduler held, then stops for
// the rest of the outage, and the frontier does not read idle (RabbitMQ
// counts a queue without a leader 0); nothing is lost: when the nodes
// come back the crawl goes on and completes with every page requested and
// stored.
func quorumLost(t *testing.T, cs *clusterStack) {
	cluster, s, sched := cs.cluster, cs.s, cs.sched
	web := webtest.Start(t, clusterWeb(155))
	c := s.temporal.Client()
	cfg := s.newCampaign("quorum-lost", web, 4)
	cfg.PerHostDelay = new(50 * time.Millisecond)
	run := ctStartCampaign(t, c, cfg)
	total := len(web.Pages())
	await.For(t, 2*time.Minute, 50*time.Millisecond, "a third of the crawl", func() error { return ctAtLeastRequested(web, total/3) })
	key := ctFrontierKey(t, c, cfg.ID)
	// The scheduler dialled the first node; the other two go, while pages
	// are held half-sent, so that the fault finds leases out.
	down := cluster.Nodes[1:]
	ctHoldAPage(t, web)
	st, _ := sched.Server().Stats(key)
	atFault, heldAtFault := ctPagesRequested(web), st.Held
	started := false
	startDown := func() {
		if started {
			return
		}
		started = true
		for _, n := range down {
			require.NoError(t, n.Ctl(context.Background(), "start_app"), "starting %s", n.Name)
		}
	}
	t.Cleanup(startDown) // the next faults need the quorum back, whatever fails here
	for _, n := range down {
		require.NoError(t, n.Ctl(context.Background(), "stop_app"), "stopping %s", n.Name)
	}
	stoppedAt := time.Now()
	t.Logf("%d nodes stopped with %d of %d pages requested, %d leases out, %d URLs held", len(down), atFault, total, st.InFlight, st.Held)
	require.NotZero(t, st.InFlight, "the loss of quorum hit no work in flight: %d leases out, %d of %d pages requested", st.InFlight, atFault, total)
	require.Less(t, atFault, total, "the loss of quorum hit no work in flight: %d leases out, %d of %d pages requested", st.InFlight, atFault, total)
	web.ReleaseBodies()
	// The scheduler fetches what it held, then has nothing: no queue can
	// deliver. RabbitMQ then counts every queue 0 (no leader answers), and
	// the campaign must not take that for drained.
	// (An outcome may stay pending: its links' publishes cannot be
	// confirmed without a quorum.)
	await.For(t, 5*time.Minute, 200*time.Millisecond, "the scheduler to run out of the URLs it held", func() error {
		st, _ = sched.Server().Stats(key)
		if st.Held+st.InFlight > 0 {
			return fmt.Errorf("held %d, in flight %d", st.Held, st.InFlight)
		}
		return nil
	})
	requested := ctPagesRequested(web) - atFault
	t.Logf("without a quorum: %d pages requested, then nothing held (%s after the stop); %d queues uncounted, %d outcomes pending", requested, time.Since(stoppedAt).Round(100*time.Millisecond), st.Uncounted, st.Pending)
	assert.LessOrEqual(t, requested, int(heldAtFault), "%d pages requested without a quorum, more than the %d URLs held at the stop: delivered without a quorum", requested, heldAtFault)
	time.Sleep(quorumLostFor) // Monitor reads the stats every second
	// A reading that fails is no idle reading either (Monitor's rule).
	st, err := sched.Server().Stats(key)
	if err == nil {
		assert.False(t, st.Idle(), "the frontier reads idle without a quorum (RabbitMQ's zeros taken for counts): %+v", st)
	}
	t.Logf("%s into the outage: %d queues uncounted, reading error %v", time.Since(stoppedAt).Round(100*time.Millisecond), st.Uncounted, err)
	wst, err := ctQueryStatus(t, c, cfg.ID)
	require.NoError(t, err, "without a quorum the campaign is %s (%s), want running: it would delete queues that hold URLs", wst.State, wst.Reason)
	require.Equal(t, "running", wst.State, "without a quorum the campaign is %s (%s), want running: it would delete queues that hold URLs", wst.State, wst.Reason)
	startDown()
	checkCrawlWhole(t, s, web, run, time.Now(), "the quorum came back")
}

// partitionFor is how long partitionHealed keeps a node cut off.
const partitionFor = 30 * time.Second

// partitionHealed: the node the scheduler is connected to is cut off from
// the other two for partitionFor, in the middle of a crawl with leases
// out, while every node stays up. The node, in the minority, pauses
// (pause_minority) and closes its clients' connections; the scheduler
// moves to a node of the majority and the crawl goes on there. Then the
// partition heals with pages still to crawl, the node rejoins, and the
// campaign completes with every page requested and stored.
func partitionHealed(t *testing.T, cs *clusterStack) {
	cluster, s, sched := cs.cluster, cs.s, cs.sched
	web := webtest.Start(t, clusterWeb(157))
	c := s.temporal.Client()
	cfg := s.newCampaign("quorum-partition", web, 4)
	cfg.PerHostDelay = new(clusterDelay(400 * time.Millisecond)) // 15 pages a second: the crawl goes on well past the heal
	run := ctStartCampaign(t, c, cfg)
	total := len(web.Pages())
	await.For(t, 2*time.Minute, 50*time.Millisecond, "a fifth of the crawl", func() error { return ctAtLeastRequested(web, total/5) })
	key := ctFrontierKey(t, c, cfg.ID)
	cut := schedulersNode(t, cluster)
	defer watchQueues(t, cluster, "drover."+key+".")()
	ctHoldAPage(t, web)
	st, _ := sched.Server().Stats(key)
	atFault, held := ctPagesRequested(web), web.Held()
	require.NoError(t, cluster.Partition(context.Background(), cut), "cutting %s off", cut.Name)
	t.Cleanup(func() { cluster.Heal(context.Background(), cut) }) // again: the next faults need it whole
	cutAt := time.Now()
	t.Logf("%s cut off with %d of %d pages requested, %d leases out, %d pages held mid-body", cut.Name, atFault, total, st.InFlight, held)
	require.NotZero(t, st.InFlight, "the partition hit no work in flight: %d leases out, %d of %d pages requested", st.InFlight, atFault, total)
	require.Less(t, atFault, total, "the partition hit no work in flight: %d leases out, %d of %d pages requested", st.InFlight, atFault, total)
	web.ReleaseBodies()
	peer := cluster.Nodes[0]
	if peer == cut {
		peer = cluster.Nodes[1]
	}
	await.For(t, partitionFor/2, 100*time.Millisecond, "the majority to see "+cut.Name+" gone", func() error {
		running, err := peer.Running(context.Background())
		if err == nil && slices.Contains(running, cut.Name) {
			err = fmt.Errorf("%s sees %v running", peer.Name, running)
		}
		return err
	})
	time.Sleep(time.Until(cutAt.Add(partitionFor)))
	during := ctPagesRequested(web) - atFault
	assert.NotSame(t, cut, schedulersNode(t, cluster), "the scheduler's connections are still on %s, cut off", cut.Name)
	atHeal := ctPagesRequested(web)
	require.NoError(t, cluster.Heal(context.Background(), cut), "healing %s", cut.Name)
	t.Logf("during the partition of %s: %d pages requested; %d of %d at the heal", partitionFor, during, atHeal, total)
	require.Less(t, atHeal, total, "the crawl was over (%d of %d pages) before the heal: the heal proves nothing", atHeal, total)
	assert.Greater(t, during, held, "%d pages requested while %s was cut off: the majority should carry the crawl", during, cut.Name)
	await.For(t, 2*time.Minute, time.Second, cut.Name+" back in the cluster", func() error {
		running, err := cut.Running(context.Background())
		if err == nil && len(running) != len(cluster.Nodes) {
			err = fmt.Errorf("running %v", running)
		}
		return err
	})
	checkCrawlWhole(t, s, web, run, cutAt.Add(partitionFor), "the partition healed")
}

// watchQueues logs, every two seconds until the returned stop, the
// campaign's quorum queues that hold anything as their leaders hold them
// (chaos.RabbitCluster.QueueStates: messages checked out and in a
// dead-letter hand-over too, which AMQP's counts leave out), when it
// changed: what a fault test shows of where its URLs were.
func watchQueues(t *testing.T, c *chaos.RabbitCluster, prefix string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := ""
		for ctx.Err() == nil {
			if out, err := c.QueueStates(ctx, prefix); err == nil && out != last {
				t.Logf("queues holding anything at %s: %s", time.Now().Format("15:04:05.0"), out)
				last = out
			}
			select {
			case <-ctx.Done():
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return func() { cancel(); <-done }
}

// schedulersNode is the cluster node the scheduler's AMQP connections are
// on (the only clients of the cluster).
func schedulersNode(t *testing.T, c *chaos.RabbitCluster) *chaos.RabbitNode {
	t.Helper()
	var by map[string]int
	// Around a partition a node's answer may be an RPC's timeout; the
	// next one, a second later, is whole.
	await.For(t, 30*time.Second, time.Second, "a node to list the connections", func() (err error) {
		by, err = c.Connections(context.Background())
		return err
	})
	require.Len(t, by, 1, "the scheduler's connections are on %v, want one node", by)
	for name := range by {
		if n := c.Node(name); n != nil {
			return n
		}
	}
	require.FailNowf(t, "connections on no node of the cluster", "connections on %v, which is no node of the cluster", by)
	return nil
}

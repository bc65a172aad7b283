package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/session"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/workflows"
)

// gatedListener makes a broker unreachable on demand, as a TCP proxy that
// refuses connections would: while down, open connections are cut and new
// ones closed at once. The broker keeps its data (kfake is in memory, so
// stopping it would lose the topic).
type gatedListener struct {
	net.Listener
	mu    sync.Mutex
	down  bool
	conns map[net.Conn]struct{}
}

func (g *gatedListener) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		g.mu.Lock()
		if g.down {
			g.mu.Unlock()
			c.Close()
			continue
		}
		g.conns[c] = struct{}{}
		g.mu.Unlock()
		return c, nil
	}
}

func (g *gatedListener) setDown(down bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.down = down
	if down {
		for c := range g.conns {
			c.Close()
		}
		g.conns = map[net.Conn]struct{}{}
	}
}

// TestKafkaOutage: Kafka unreachable for 30 s in the middle of a crawl; the
// crawl holds back, continues when Kafka returns and completes with every
// page in the topic.
func TestKafkaOutage(t *testing.T) {
	web, err := testweb.Start(testweb.Config{Hosts: 3, PagesPerHost: 150, CrossHost: true, Base: 33})
	if err != nil {
		t.Fatal(err)
	}
	defer web.Close()
	ctx := context.Background()
	tmp, err := devstack.StartTemporal(ctx, devstack.TemporalOptions{UIPort: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.Stop()

	var gate *gatedListener
	topic := fmt.Sprintf("pages-%d", rand.IntN(1e9))
	k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(devstack.KafkaPartitions, topic),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(devstack.KafkaMaxMessageBytes)}),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			gate = &gatedListener{Listener: ln, conns: map[net.Conn]struct{}{}}
			return gate, nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	brokers := k.ListenAddrs()[0]

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	sched, err := node.StartScheduler(ctx, node.SchedulerConfig{Server: frontier.DefaultServerConfig(), Listen: "127.0.0.1:0", AMQPURL: amqpURL(), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	defer sched.Close()
	w, err := node.StartWorkers(tmp.Client(), node.WorkerConfig{Identity: "outage-worker", Activities: &activities.Activities{
		Schedulers: []string{sched.Addr()}, Token: session.DevToken, KafkaBrokers: brokers, Identity: "outage-worker",
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	cfg := campaign.Config{
		ID: fmt.Sprintf("outage-%d", rand.IntN(1e9)), Seeds: web.Seeds(), Fetchers: 2,
		PerHostDelay: new(10 * time.Millisecond), AllowPrivate: true,
		Sinks: []string{"kafka://" + brokers + "/" + topic},
	}
	run, err := tmp.Client().ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: cfg.ID, TaskQueue: workflows.TaskQueue},
		workflows.WorkflowName, workflows.CampaignInput{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	pages := web.Pages()
	deadline := time.Now().Add(2 * time.Minute)
	for web.Total() < len(pages)/3 {
		if time.Now().After(deadline) {
			t.Fatalf("crawl did not get going: %d requests", web.Total())
		}
		time.Sleep(20 * time.Millisecond)
	}
	gate.setDown(true)
	downAt, before := time.Now(), web.Total()
	time.Sleep(30 * time.Second) // the outage itself, not a synchronization
	during := web.Total() - before
	gate.setDown(false)
	t.Logf("Kafka down for %s: the web saw %d requests meanwhile (of %d pages)", time.Since(downAt).Round(time.Second), during, len(pages))

	wctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	var st workflows.Status
	if err := run.Get(wctx, &st); err != nil {
		t.Fatalf("campaign: %v", err)
	}
	if st.State != campaign.StateCompleted {
		t.Fatalf("state %s (%s)", st.State, st.Reason)
	}
	if m := web.Missing(); len(m) > 0 {
		t.Errorf("%d pages never requested: %v", len(m), m[:min(5, len(m))])
	}
	got := map[string]int{}
	for _, m := range readTopic(t, brokers, topic, len(pages)) {
		got[string(m.Key)]++
	}
	missing := 0
	for _, u := range pages {
		if got[u] == 0 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d pages missing in the topic after the outage", missing, len(pages))
	}
	if during > 2*cfg.Fetchers*cfg.WithDefaults().FetcherConcurrency {
		t.Errorf("the crawl did not hold back: %d requests while Kafka was down", during)
	}
}

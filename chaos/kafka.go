package chaos

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/drover-crawl/drover/devstack"
)

// GatedKafka is an in-memory broker that can be made unreachable: while
// down, its open connections are cut and new ones closed at once. A proxy
// in front would not do: Kafka clients connect to the address the broker
// advertises, so the gate sits on the broker's own listener.
type GatedKafka struct {
	cluster *kfake.Cluster
	gate    *gatedListener
	Addr    string
}

// StartGatedKafka starts a broker on a free port with topic created.
func StartGatedKafka(topic string) (*GatedKafka, error) {
	g := &GatedKafka{}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(devstack.KafkaPartitions, topic),
		kfake.BrokerConfigs(map[string]string{"message.max.bytes": strconv.Itoa(devstack.KafkaMaxMessageBytes)}),
		kfake.ListenFn(func(network, addr string) (net.Listener, error) {
			ln, err := net.Listen(network, addr)
			if err != nil {
				return nil, err
			}
			g.gate = &gatedListener{Listener: ln, conns: map[net.Conn]struct{}{}}
			return g.gate, nil
		}))
	if err != nil {
		return nil, err
	}
	g.cluster, g.Addr = c, c.ListenAddrs()[0]
	return g, nil
}

// SetDown makes the broker unreachable (true) or reachable again (false).
func (g *GatedKafka) SetDown(down bool) { g.gate.setDown(down) }

// Close stops the broker.
func (g *GatedKafka) Close() { g.cluster.Close() }

// Count reads every record of topic (at most for countWithin) and counts
// them by key; a read cut short counts what it read.
func (g *GatedKafka) Count(topic string) map[string]int {
	ctx, cancel := context.WithTimeout(context.Background(), countWithin)
	defer cancel()
	msgs, _ := devstack.ReadTopic(ctx, g.Addr, topic)
	got := map[string]int{}
	for _, m := range msgs {
		got[string(m.Key)]++
	}
	return got
}

// countWithin bounds Count: reading a row's topic takes seconds.
const countWithin = 2 * time.Minute

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
		clear(g.conns)
	}
}

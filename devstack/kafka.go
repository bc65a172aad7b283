package devstack

import (
	"fmt"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kfake"
)

// Kafka settings of the in-memory broker.
const (
	// KafkaPagesTopic is the topic the Kafka sink writes pages to by default.
	KafkaPagesTopic = "drover.pages"
	// KafkaPartitions is the partition count of seeded and auto-created topics.
	KafkaPartitions = 4
	// KafkaMaxMessageBytes is the broker's message.max.bytes: a 1 MiB body
	// plus headers and batch overhead must fit, Kafka's default (1 MiB + 12 B)
	// does not leave room for them.
	KafkaMaxMessageBytes = 8 << 20
)

// Kafka is an in-memory, single-broker Kafka (franz-go's kfake) that
// kafka-go and franz-go clients talk to as to a real broker. Its contents are
// gone when it closes.
type Kafka struct {
	cluster *kfake.Cluster
	addr    string
}

// StartKafka starts a broker listening on addr ("127.0.0.1:0" for a free
// port), with the given topics created with KafkaPartitions partitions each.
// Topics that clients ask for are created too. A fixed port that is already
// taken fails with a *PortInUseError naming its owner.
func StartKafka(addr string, topics ...string) (*Kafka, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("kafka listen address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("kafka listen address %q: port must be 0-65535", addr)
	}
	if port != 0 {
		if err := CheckPortFreeFor(addr, "KAFKA_BROKERS"); err != nil {
			return nil, fmt.Errorf("kafka: %w", err)
		}
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		// kfake always listens on 127.0.0.1; bind the host we were given.
		kfake.ListenFn(func(network, a string) (net.Listener, error) {
			_, p, err := net.SplitHostPort(a)
			if err != nil {
				return nil, err
			}
			return net.Listen(network, net.JoinHostPort(host, p))
		}),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(KafkaPartitions),
		kfake.BrokerConfigs(map[string]string{
			"message.max.bytes": strconv.Itoa(KafkaMaxMessageBytes),
		}),
	}
	if len(topics) > 0 {
		opts = append(opts, kfake.SeedTopics(KafkaPartitions, topics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("starting in-memory kafka on %s: %w", addr, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return nil, fmt.Errorf("in-memory kafka: want 1 listener, got %d", len(addrs))
	}
	return &Kafka{cluster: c, addr: addrs[0]}, nil
}

// Addr is the broker's host:port, for KAFKA_BROKERS.
func (k *Kafka) Addr() string { return k.addr }

// Close stops the broker and drops everything it held.
func (k *Kafka) Close() { k.cluster.Close() }

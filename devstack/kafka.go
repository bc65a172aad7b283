package devstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
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

// Kafka is a single-broker Kafka (franz-go's kfake) that kafka-go and
// franz-go clients talk to as to a real broker: in memory (gone when it
// closes), or with its log on disk (KafkaOptions.DataDir).
type Kafka struct {
	cluster *kfake.Cluster
	addr    string
}

// KafkaOptions configures StartKafkaWith.
type KafkaOptions struct {
	// Addr to listen on; "127.0.0.1:0" for a free port.
	Addr string
	// DataDir keeps the broker's log, topics and offsets in this directory,
	// written through (fsync) on every produce: a record acknowledged with
	// acks=all is on disk, and a broker started again on the directory,
	// after a Close or a SIGKILL, serves it. Empty keeps everything in
	// memory.
	DataDir string
	// Topics are created with KafkaPartitions partitions each, unless they
	// exist (in DataDir) already.
	Topics []string
}

// StartKafka starts an in-memory broker listening on addr ("127.0.0.1:0"
// for a free port), with the given topics created with KafkaPartitions
// partitions each. Topics that clients ask for are created too. A fixed
// port that is already taken fails with a *PortInUseError naming its owner.
func StartKafka(addr string, topics ...string) (*Kafka, error) {
	return StartKafkaWith(KafkaOptions{Addr: addr, Topics: topics})
}

// StartKafkaWith is StartKafka with its log on disk when opts.DataDir is set.
func StartKafkaWith(opts KafkaOptions) (*Kafka, error) {
	addr, topics := opts.Addr, opts.Topics
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
	kopts := []kfake.Opt{
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
		kopts = append(kopts, kfake.SeedTopics(KafkaPartitions, topics...))
	}
	what := "in-memory kafka"
	if opts.DataDir != "" {
		// SyncWrites: without it kfake fsyncs only when a segment rolls and
		// at Close, so acks=all would mean "in the page cache".
		kopts = append(kopts, kfake.DataDir(opts.DataDir), kfake.SyncWrites())
		what = "kafka (log in " + opts.DataDir + ")"
	}
	c, err := kfake.NewCluster(kopts...)
	if err != nil {
		return nil, fmt.Errorf("starting %s on %s: %w", what, addr, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) != 1 {
		c.Close()
		return nil, fmt.Errorf("%s: want 1 listener, got %d", what, len(addrs))
	}
	k := &Kafka{cluster: c, addr: addrs[0]}
	if opts.DataDir != "" && len(topics) > 0 {
		// kfake seeds topics only into an empty directory; one written by an
		// older stack may lack a topic added since.
		if err := k.ensureTopics(topics); err != nil {
			c.Close()
			return nil, fmt.Errorf("%s: %w", what, err)
		}
	}
	return k, nil
}

// ensureTopics creates those of topics the broker does not have.
func (k *Kafka) ensureTopics(topics []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := kafka.DialContext(ctx, "tcp", k.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(deadlineOf(ctx))
	for _, t := range topics {
		// One at a time: kafka-go reports only the first error of a batch.
		err := conn.CreateTopics(kafka.TopicConfig{Topic: t, NumPartitions: KafkaPartitions, ReplicationFactor: 1})
		if err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
			return fmt.Errorf("creating topic %s: %w", t, err)
		}
	}
	return nil
}

// Addr is the broker's host:port, for KAFKA_BROKERS.
func (k *Kafka) Addr() string { return k.addr }

// Close stops the broker. An in-memory broker drops everything it held; one
// with a DataDir writes its state there first.
func (k *Kafka) Close() { k.cluster.Close() }

// readTopicMaxWait is how long ReadTopic's fetches may wait on the broker.
// kafka-go derives its read deadline from it, and the first fetch of a
// broker restarted on its data directory reads megabytes of segments from
// disk: with 100 ms, under -race, that fetch timed out again and again and
// a partition was never read (TestKafkaDataDirSurvivesRestart, 1 run in 5).
// A long wait costs nothing here: a fetch answers as soon as it has a
// record, and ReadTopic stops at the end offset.
const readTopicMaxWait = 5 * time.Second

// ReadTopic reads every record of topic on brokers, each partition up to
// the end offset the broker reports when its reading starts, so that a
// slow fetch on a loaded machine is waited for instead of taken for the
// end (a 2 s pause in reading once cut a partition short). ctx bounds it;
// on an error it returns the records read so far.
func ReadTopic(ctx context.Context, brokers, topic string) ([]kafka.Message, error) {
	var out []kafka.Message
	for p := range KafkaPartitions {
		conn, err := kafka.DialLeader(ctx, "tcp", brokers, topic, p)
		if err != nil {
			return out, fmt.Errorf("reading %s[%d]: %w", topic, p, err)
		}
		end, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			return out, fmt.Errorf("reading %s[%d]'s end offset: %w", topic, p, err)
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, Topic: topic, Partition: p, MaxBytes: KafkaMaxMessageBytes, MaxWait: readTopicMaxWait})
		for next := int64(0); next < end; {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				return out, fmt.Errorf("reading %s[%d] at %d of %d: %w", topic, p, next, end, err)
			}
			out = append(out, m)
			next = m.Offset + 1
		}
		r.Close()
	}
	return out, nil
}

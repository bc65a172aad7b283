package sink

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/segmentio/kafka-go"

	"github.com/drover-crawl/drover/sink/sinkuri"
)

// lineCap is the record limit of a line topic: a crawl log line is a few
// hundred bytes, and a broker's default limit (1 MB) must take it.
const lineCap = 64 << 10

// OpenKafkaLines opens a kafka:// URI (as Open takes it, with its options
// and opts' brokers and secrets) as a topic of lines, written with
// WriteLine: the crawl log's topic. Its records are at most 64 KiB plus
// headers, which a broker's default limit takes.
func OpenKafkaLines(ctx context.Context, uri string, opts Options) (*Kafka, error) {
	if err := sinkuri.Check(uri); err != nil {
		return nil, err
	}
	u, err := url.Parse(uri)
	if err != nil || sinkuri.Lookup(uri) != sinkuri.Kafka {
		return nil, fmt.Errorf("topic %q: must be kafka://HOST:PORT/TOPIC (or kafka:///TOPIC for the worker's KAFKA_BROKERS)", sinkuri.Redact(uri))
	}
	opts.BodyCap = lineCap
	cfg, err := kafkaConfig(u, opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("topic %s names no brokers and KAFKA_BROKERS is not set", u.Redacted())
	}
	return NewKafka(ctx, cfg)
}

// WriteLine writes one record, key and line as given, and returns nil only
// when every in-sync replica has it (acks=all), as Store does.
func (k *Kafka) WriteLine(ctx context.Context, key string, line []byte) error {
	err := k.w.WriteMessages(ctx, kafka.Message{Key: []byte(key), Value: line})
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) && len(werrs) == 1 && werrs[0] != nil {
		err = werrs[0]
	}
	if err != nil {
		return fmt.Errorf("kafka %s topic %s: write %s: %w", k.brokers, k.topic, key, err)
	}
	return nil
}

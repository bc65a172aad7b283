package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/sink/sinkuri"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
)

// KafkaConfig configures a Kafka sink. Zero values take the defaults below.
type KafkaConfig struct {
	// Brokers are the bootstrap brokers, "host:port" each.
	Brokers []string
	Topic   string
	// BodyCap is the campaign's body cap (0: none); MaxBody follows it
	// when unset.
	BodyCap int64
	// MaxBody is the largest body a record carries (the URI's max_body=;
	// default BodyCap, or DefaultMaxBody when the campaign has no cap). A
	// larger body is not cut: its record is a pointer (see Store). The
	// record limit is MaxBody plus HeaderRoom.
	MaxBody int64
	// HeaderRoom is the room left for key and headers (status line, the raw
	// HTTP header block, ...) above MaxBody (default 64 KiB).
	HeaderRoom int64
	// Compression is "", "none", "gzip", "snappy", "lz4" or "zstd".
	Compression string
	// CreateTopic creates Topic (Partitions partitions, Replication
	// replicas) when it does not exist; otherwise a missing topic is an
	// error wrapping ErrTopicMissing at NewKafka.
	CreateTopic bool
	// Partitions of a created topic (default 8).
	Partitions int
	// Replication is the replication factor of a created topic; 0 (the
	// default) leaves it to the broker's default.replication.factor
	// (Kafka 2.4 and later).
	Replication int
	// BatchSize is the most records in one produce per partition (default
	// 200) and BatchTimeout the longest a record waits for its batch to fill
	// (the sink URI's linger=, default DefaultLinger): a Store returns after
	// at most about BatchTimeout plus the round trip to the broker. Zero
	// takes the default; for no wait at all give noLinger (linger=0).
	BatchSize    int
	BatchTimeout time.Duration
	// DialTimeout bounds connecting to a broker (default 5s).
	DialTimeout time.Duration
	// CloseTimeout bounds Close's flush of records whose Store already
	// returned (default 10s); see Close.
	CloseTimeout time.Duration
	// TLS, when set, connects to the brokers over TLS; SASL, when set,
	// authenticates (PLAIN or SCRAM, see kafkaConfig).
	TLS  *tls.Config
	SASL sasl.Mechanism
}

// maxBatchMargin is kept below the broker's limit because kafka-go counts a
// batch's bytes without the record-batch framing the broker counts.
const maxBatchMargin = 16 << 10

// DefaultLinger is how long a page waits for others to share its produce
// request (per partition), as Kafka producers' linger.ms. Every produce
// costs the broker a request and a log append (the dev stack's broker an
// fsync of segment and index) whatever its size: at 5 ms the dev stack
// wrote about 5 pages per produce and its broker made 4.9 syscalls per
// page, at 20 ms 2.7. A crawler's throughput does not wait on it: a fetch
// slot is held 15 ms longer per page, and a host's next request is
// spaced from this one's start, not from its store.
const DefaultLinger = 20 * time.Millisecond

// noLinger is linger=0: kafka-go reads a BatchTimeout of 0 as its own
// default (1 s), so no wait is asked for as the shortest one.
const noLinger = time.Nanosecond

// maxLinger bounds linger=: every Store waits up to it.
const maxLinger = 10 * time.Second

// Kafka is a Sink writing one record per page to a Kafka topic with acks=all:
// key = URL (so a consumer can drop duplicates and all fetches of a URL land
// in one partition), value = the body as sent (empty for a revisit), the
// rest in record headers (see Store). Many concurrent Stores are batched by
// kafka-go's Writer: each synchronous WriteMessages joins the partition's
// open batch and waits for that batch's produce response.
//
// Record limit: a record is at most BodyCap+HeaderRoom bytes (value, key and
// headers). The broker must accept it: its message.max.bytes (or the topic's
// max.message.bytes) must be at least BodyCap+HeaderRoom+16 KiB, which
// NewKafka checks when the broker answers DescribeConfigs. Kafka's default
// (1048588) is too small for a 1 MiB body cap.
type Kafka struct {
	maxBody      int64
	w            *kafka.Writer
	transport    *kafka.Transport
	brokers      string
	topic        string
	closeTimeout time.Duration
	// placed maps a pending Store's record, by the address of its first
	// header (the writer's copies of a record share its headers), to its
	// Page.Stored: kafka-go tells a record's partition and offset only to
	// the Writer's Completion, which adds them there.
	placed sync.Map
}

// NewKafka connects to cfg.Brokers, checks (or creates) the topic and its
// record limit, and returns the sink. An unreachable broker gives an error
// wrapping ErrUnreachable that names the address and how to start Kafka.
func NewKafka(ctx context.Context, cfg KafkaConfig) (*Kafka, error) {
	if len(cfg.Brokers) == 0 || cfg.Topic == "" {
		return nil, errors.New("kafka sink: Brokers and Topic are required")
	}
	cfg = cfg.withDefaults()
	codec, err := kafkaCompression(cfg.Compression)
	if err != nil {
		return nil, err
	}
	brokers := strings.Join(cfg.Brokers, ",")
	transport := cfg.transport(cfg.DialTimeout)
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: transport}

	if err := ensureTopic(ctx, client, cfg, brokers, false); err != nil {
		transport.CloseIdleConnections()
		return nil, err
	}
	batchBytes, err := checkRecordLimit(ctx, client, cfg, brokers)
	if err != nil {
		transport.CloseIdleConnections()
		return nil, err
	}

	k := &Kafka{maxBody: cfg.MaxBody, transport: transport, brokers: brokers, topic: cfg.Topic, closeTimeout: cfg.CloseTimeout}
	k.w = &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Topic:        cfg.Topic,
		Balancer:     &kafka.Murmur2Balancer{}, // the Java client's key hash: keyed consumers agree on partitions
		RequiredAcks: kafka.RequireAll,
		BatchSize:    cfg.BatchSize,
		BatchBytes:   batchBytes,
		BatchTimeout: cfg.BatchTimeout,
		Compression:  codec,
		Transport:    transport,
		Completion:   k.completed,
	}
	return k, nil
}

// completed adds the partition and offset of each record written to the
// Page.Stored of the Store that is waiting for it. kafka-go calls it
// before that Store's WriteMessages returns.
func (k *Kafka) completed(msgs []kafka.Message, err error) {
	if err != nil {
		return
	}
	for _, m := range msgs {
		if len(m.Headers) == 0 {
			continue
		}
		if v, ok := k.placed.Load(&m.Headers[0]); ok {
			v.(*page.Locations).Add(page.Location{Kind: sinkuri.Kafka.Name, Topic: m.Topic, Partition: m.Partition, Offset: m.Offset})
		}
	}
}

// transport dials the brokers, with TLS and SASL when cfg has them.
func (cfg KafkaConfig) transport(dialTimeout time.Duration) *kafka.Transport {
	return &kafka.Transport{Dial: (&net.Dialer{Timeout: dialTimeout}).DialContext, TLS: cfg.TLS, SASL: cfg.SASL}
}

func (cfg KafkaConfig) withDefaults() KafkaConfig {
	cfg.MaxBody = positiveOr(cfg.MaxBody, positiveOr(cfg.BodyCap, DefaultMaxBody))
	cfg.HeaderRoom = positiveOr(cfg.HeaderRoom, 64<<10)
	cfg.Partitions = positiveOr(cfg.Partitions, 8)
	cfg.BatchSize = positiveOr(cfg.BatchSize, 200)
	cfg.BatchTimeout = positiveOr(cfg.BatchTimeout, DefaultLinger)
	cfg.DialTimeout = positiveOr(cfg.DialTimeout, 5*time.Second)
	cfg.CloseTimeout = positiveOr(cfg.CloseTimeout, 10*time.Second)
	return cfg
}

// validateWait is how long a validate_only topic creation is given.
const validateWait = time.Second

// ensureTopic checks that cfg.Topic exists, or creates it when
// cfg.CreateTopic asks to; with validateOnly the broker only checks that it
// would create it (CreateTopics' validate_only), and nothing changes.
func ensureTopic(ctx context.Context, client *kafka.Client, cfg KafkaConfig, brokers string, validateOnly bool) error {
	md, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{cfg.Topic}})
	if err != nil {
		if aerr := kafkaAuthError(cfg, brokers, err); aerr != nil {
			return aerr
		}
		return kafkaUnreachable(brokers, err)
	}
	for _, t := range md.Topics {
		if t.Name == cfg.Topic && t.Error == nil && len(t.Partitions) > 0 {
			return nil
		}
	}
	if !cfg.CreateTopic {
		return fmt.Errorf("kafka %s: %w", brokers, &topicMissingError{topic: cfg.Topic})
	}
	replication := cfg.Replication
	if replication <= 0 {
		replication = -1 // the broker's default.replication.factor
	}
	cctx := ctx
	if validateOnly {
		// kafka-go waits for a topic it was asked to create to show up in
		// the metadata, until the context ends, even when validate_only
		// created none; the broker answers within milliseconds.
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, validateWait)
		defer cancel()
	}
	res, err := client.CreateTopics(cctx, &kafka.CreateTopicsRequest{ValidateOnly: validateOnly, Topics: []kafka.TopicConfig{{
		Topic: cfg.Topic, NumPartitions: cfg.Partitions, ReplicationFactor: replication,
	}}})
	if validateOnly && errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return nil // no answer in time: nothing known against the creation
	}
	if err != nil {
		return fmt.Errorf("kafka %s: create topic %q: %w", brokers, cfg.Topic, err)
	}
	if err := res.Errors[cfg.Topic]; err != nil && !errors.Is(err, kafka.TopicAlreadyExists) {
		return fmt.Errorf("kafka %s: create topic %q (%d partitions, replication %s): %w", brokers, cfg.Topic, cfg.Partitions, replicationText(cfg.Replication), err)
	}
	return nil
}

func replicationText(n int) string {
	if n <= 0 {
		return "the broker's default"
	}
	return strconv.Itoa(n)
}

// topicMissingError is ensureTopic's error for a topic that does not exist
// and is not to be created.
type topicMissingError struct{ topic string }

func (e *topicMissingError) Error() string {
	return fmt.Sprintf("topic %q does not exist; create it or add ?create=true to the sink URI", e.topic)
}

func (e *topicMissingError) Is(target error) bool { return target == ErrTopicMissing }

// checkRecordLimit checks that the broker takes a record of cfg.MaxBody plus
// cfg.HeaderRoom and returns the writer's batch bytes: what the broker
// takes, when it says, so that produce requests are as full as it allows.
func checkRecordLimit(ctx context.Context, client *kafka.Client, cfg KafkaConfig, brokers string) (int64, error) {
	recordLimit := cfg.MaxBody + cfg.HeaderRoom
	brokerMax, ok := topicMaxMessageBytes(ctx, client, cfg.Topic)
	if !ok {
		return recordLimit, nil
	}
	if brokerMax-maxBatchMargin < recordLimit {
		return 0, fmt.Errorf("kafka %s topic %s: max.message.bytes is %d, a record may need %d (max_body %d + %d of headers + %d of framing): raise the broker's message.max.bytes or the topic's max.message.bytes, or lower the sink's max_body=: %w",
			brokers, cfg.Topic, brokerMax, recordLimit+maxBatchMargin, cfg.MaxBody, cfg.HeaderRoom, maxBatchMargin, ErrRecordTooLarge)
	}
	return brokerMax - maxBatchMargin, nil
}

// topicMaxMessageBytes reads the topic's effective max.message.bytes; ok is
// false when the broker does not say (old broker, no DescribeConfigs ACL).
// All of the topic's configs are asked for, and the most specific source
// wins, because brokers differ in how they report a broker-wide setting: Kafka
// as the topic's max.message.bytes, kfake as message.max.bytes.
func topicMaxMessageBytes(ctx context.Context, client *kafka.Client, topic string) (int64, bool) {
	res, err := client.DescribeConfigs(ctx, &kafka.DescribeConfigsRequest{Resources: []kafka.DescribeConfigRequestResource{{
		ResourceType: kafka.ResourceTypeTopic, ResourceName: topic,
	}}})
	if err != nil {
		return 0, false
	}
	var best int64
	bestRank := int8(127)
	for _, r := range res.Resources {
		if r.Error != nil {
			continue
		}
		for _, e := range r.ConfigEntries {
			if e.ConfigName != "max.message.bytes" && e.ConfigName != "message.max.bytes" {
				continue
			}
			n, err := strconv.ParseInt(e.ConfigValue, 10, 64)
			if err != nil || n <= 0 {
				continue
			}
			// ConfigSource: 1 topic, 2 dynamic broker, 3 dynamic default,
			// 4 static broker, 5 default; 0 when the version has none.
			rank := e.ConfigSource
			if rank <= 0 {
				rank = 1
				if e.IsDefault {
					rank = 5
				}
			}
			if rank < bestRank {
				best, bestRank = n, rank
			}
		}
	}
	return best, best > 0
}

// kafkaAuthError names a failed SASL authentication (or TLS handshake),
// or is nil. A broker that refuses the credentials answers
// SASL_AUTHENTICATION_FAILED, or (kfake, some proxies) just closes the
// connection: with SASL configured, a connection closed before the first
// answer is reported as a likely refusal.
func kafkaAuthError(cfg KafkaConfig, brokers string, err error) error {
	switch {
	case cfg.SASL != nil && errors.Is(err, kafka.SASLAuthenticationFailed):
		return fmt.Errorf("kafka %s: SASL %s authentication refused (check the user name and KAFKA_SASL_PASSWORD): %v", brokers, cfg.SASL.Name(), err)
	case cfg.SASL != nil && (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)):
		return fmt.Errorf("kafka %s: the broker closed the connection during SASL %s authentication: the credentials were likely refused (check the user name and KAFKA_SASL_PASSWORD), or the listener wants TLS (?tls=true): %v: %w", brokers, cfg.SASL.Name(), err, ErrUnreachable)
	}
	var certErr *tls.CertificateVerificationError
	if cfg.TLS != nil && errors.As(err, &certErr) {
		return fmt.Errorf("kafka %s: the broker's TLS certificate is not trusted (set DROVER_TLS_CA to its CA): %v", brokers, err)
	}
	return nil
}

func kafkaUnreachable(brokers string, err error) error {
	return fmt.Errorf("kafka %s unreachable: %v (start the dev stack with `make dev`, or set KAFKA_BROKERS): %w", brokers, err, ErrUnreachable)
}

func kafkaCompression(name string) (kafka.Compression, error) {
	switch strings.ToLower(name) {
	case "", "none":
		return 0, nil
	case "gzip":
		return kafka.Gzip, nil
	case "snappy":
		return kafka.Snappy, nil
	case "lz4":
		return kafka.Lz4, nil
	case "zstd":
		return kafka.Zstd, nil
	}
	return 0, fmt.Errorf("kafka sink: compression %q: must be one of none, gzip, snappy, lz4, zstd", name)
}

// Store writes p as one record and returns nil only when every in-sync
// replica has it (acks=all). Record headers: url, status, content-type,
// content-encoding, fetched-at (RFC 3339, nanoseconds, UTC), campaign,
// depth, parent, ip, truncated ("true"/"false"), status-line, http-headers
// (the raw header block), and error when p.Err is set.
//
// A revisit (p.Revisit: the content was found unchanged since an earlier
// capture) is a small record: an empty value (never a body), this fetch's
// headers as above (status-line and http-headers are the 304's, or the
// 200's), and revisit-profile (server-not-modified or
// identical-payload-digest), refers-to-uri and refers-to-date (the key and
// fetched-at of the earlier capture's record, RFC 3339, nanoseconds, UTC)
// and payload-digest (the earlier capture's body's, "sha1:" + base32).
//
// A body larger than MaxBody is never cut: the record is a pointer, with
// an empty value and body-omitted "too-large", body-size (bytes) and
// payload-digest (of the whole body) headers, and, when a WARC sink of
// the campaign stored the page first (p.WARC, see Multi), warc-filename
// and warc-offset: the response record's file and gzip member offset.
//
// When ctx ends first, Store returns its error but the record may still be
// written: a duplicate on retry, never a loss. p must not be modified after
// the call.
func (k *Kafka) Store(ctx context.Context, p *page.Page) error {
	m, err := kafkaMessage(p, k.maxBody)
	if err != nil {
		return fmt.Errorf("kafka %s topic %s: store %s: %w", k.brokers, k.topic, p.URL, err)
	}
	if p.Stored != nil {
		k.placed.Store(&m.Headers[0], p.Stored)
		defer k.placed.Delete(&m.Headers[0])
	}
	err = k.w.WriteMessages(ctx, m)
	if err == nil {
		return nil
	}
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) && len(werrs) == 1 && werrs[0] != nil {
		err = werrs[0]
	}
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) || errors.Is(err, kafka.MessageSizeTooLarge) {
		return fmt.Errorf("kafka %s topic %s: store %s: %w: %v", k.brokers, k.topic, p.URL, ErrRecordTooLarge, err)
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return fmt.Errorf("kafka %s topic %s: store %s: %w", k.brokers, k.topic, p.URL, kafkaUnreachable(k.brokers, err))
	}
	return fmt.Errorf("kafka %s topic %s: store %s: %w", k.brokers, k.topic, p.URL, err)
}

// BodyLimit is MaxBody: Multi stores a page with a larger body in the
// campaign's WARC sinks first, so that its pointer record names the WARC
// record.
func (k *Kafka) BodyLimit() int64 { return k.maxBody }

// kafkaMessage is p's record; its value is the body, read from the spool
// when there is one, or empty when it is larger than maxBody.
func kafkaMessage(p *page.Page, maxBody int64) (kafka.Message, error) {
	h := make([]kafka.Header, 0, 17)
	add := func(k, v string) { h = append(h, kafka.Header{Key: k, Value: []byte(v)}) }
	add("url", p.URL)
	add("status", strconv.Itoa(p.Status))
	add("content-type", p.ContentType)
	add("content-encoding", p.ContentEncoding)
	add("fetched-at", p.FetchedAt.UTC().Format(time.RFC3339Nano))
	add("campaign", p.Campaign)
	add("depth", strconv.Itoa(p.Depth))
	add("parent", p.Parent)
	add("ip", p.IP)
	add("truncated", strconv.FormatBool(p.Truncated))
	add("status-line", p.StatusLine)
	h = append(h, kafka.Header{Key: "http-headers", Value: p.Header})
	if p.Err != "" {
		add("error", p.Err)
	}
	value := p.Body
	switch r := p.Revisit; {
	case r != nil:
		add("revisit-profile", r.Profile)
		add("refers-to-uri", r.RefersToURI)
		add("refers-to-date", r.RefersToDate.UTC().Format(time.RFC3339Nano))
		add("payload-digest", r.Digest)
		value = []byte{} // empty, not null: a compacted topic reads null as a tombstone
	case p.BodySize() > maxBody:
		add("body-omitted", BodyTooLarge)
		add("body-size", strconv.FormatInt(p.BodySize(), 10))
		add("payload-digest", p.BodyDigest())
		if p.WARC != nil {
			add("warc-filename", p.WARC.File)
			add("warc-offset", strconv.FormatInt(p.WARC.Offset, 10))
		}
		value = []byte{}
	case p.BodyFile != nil:
		b, err := io.ReadAll(p.BodyReader())
		if err != nil {
			return kafka.Message{}, fmt.Errorf("reading the spooled body: %w", err)
		}
		value = b
	}
	return kafka.Message{Key: []byte(p.URL), Value: value, Headers: h, Time: p.FetchedAt}, nil
}

// Close flushes pending records and closes the writer. It waits at most
// CloseTimeout: kafka-go's Close retries a batch the broker does not answer
// for up to MaxAttempts write timeouts. Giving up is safe because every
// Store has already returned, either acked or with an error; what Close
// abandons was reported as not durable.
func (k *Kafka) Close() error {
	done := make(chan error, 1)
	go func() { done <- k.w.Close() }()
	select {
	case err := <-done:
		k.transport.CloseIdleConnections()
		if err != nil {
			return fmt.Errorf("kafka %s: close: %w", k.brokers, err)
		}
		return nil
	case <-time.After(k.closeTimeout):
		k.transport.CloseIdleConnections()
		return fmt.Errorf("kafka %s: close: unacked records still pending after %v; abandoned (their Store calls returned errors)", k.brokers, k.closeTimeout)
	}
}

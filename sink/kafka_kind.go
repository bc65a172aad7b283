package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"
)

// openKafka is Open of a kafka:// URI.
func openKafka(ctx context.Context, uri string, opts Options) (Sink, error) {
	u, err := parseURI(uri)
	if err != nil {
		return nil, err
	}
	cfg, err := kafkaConfig(u, opts)
	if err != nil {
		return nil, err
	}
	if len(cfg.Brokers) == 0 {
		return nil, fmt.Errorf("sink %s names no brokers and KAFKA_BROKERS is not set", u.Redacted())
	}
	return orNil(NewKafka(ctx, cfg))
}

// checkKafka is Check of a kafka:// URI.
func checkKafka(ctx context.Context, uri string, opts Options) error {
	u, err := parseURI(uri)
	if err != nil {
		return err
	}
	cfg, err := kafkaConfig(u, opts)
	if err != nil {
		return err
	}
	if len(cfg.Brokers) == 0 {
		return nil // the workers' KAFKA_BROKERS: not known here
	}
	cfg = cfg.withDefaults()
	brokers := strings.Join(cfg.Brokers, ",")
	transport := cfg.transport(checkDialTimeout)
	defer transport.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(cfg.Brokers...), Timeout: 10 * time.Second, Transport: transport}
	if err := ensureTopic(ctx, client, cfg, brokers, true); err != nil {
		var missing *topicMissingError
		if errors.As(err, &missing) {
			return missing // the URI already names the brokers
		}
		return err
	}
	// A topic only validated for creation has no record limit to read yet.
	_, err = checkRecordLimit(ctx, client, cfg, brokers)
	return err
}

// KafkaOptions are the query options a kafka:// sink URI takes.
var KafkaOptions = []string{"compression", "create", "partitions", "replication", "linger", "tls", "sasl", "max_body"}

// KafkaSASLMechanisms are the values of a kafka:// sink's sasl= option.
var KafkaSASLMechanisms = []string{"plain", "scram-sha-256", "scram-sha-512"}

// kafkaConfig reads a kafka:// URI and its options. Brokers is empty when
// neither the URI nor opts names any.
func kafkaConfig(u *url.URL, opts Options) (KafkaConfig, error) {
	q := u.Query()
	for k := range q {
		if !slices.Contains(KafkaOptions, k) {
			return KafkaConfig{}, fmt.Errorf("sink %s: unknown option %q; a kafka:// URI takes %s", u.Redacted(), k, strings.Join(KafkaOptions, ", "))
		}
	}
	cfg := KafkaConfig{
		Topic:       strings.Trim(u.Path, "/"),
		BodyCap:     opts.BodyCap,
		Compression: q.Get("compression"),
	}
	if _, err := kafkaCompression(cfg.Compression); err != nil {
		return cfg, fmt.Errorf("sink %s: %w", u.Redacted(), err)
	}
	switch {
	case u.Host != "":
		cfg.Brokers = strings.Split(u.Host, ",")
	case opts.KafkaBrokers != "":
		cfg.Brokers = strings.Split(opts.KafkaBrokers, ",")
	}
	if v := q.Get("create"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("sink %s: create=%q: must be true or false", u.Redacted(), v)
		}
		cfg.CreateTopic = b
	}
	var err error
	if cfg.MaxBody, err = parseMaxBody(u, q.Get("max_body")); err != nil {
		return cfg, err
	}
	if v := q.Get("linger"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 || d > maxLinger {
			return cfg, fmt.Errorf("sink %s: linger=%q: must be a duration from 0 to %s (20ms, 0)", u.Redacted(), v, maxLinger)
		}
		cfg.BatchTimeout = d
		if d == 0 {
			cfg.BatchTimeout = noLinger
		}
	}
	if v := q.Get("tls"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return cfg, fmt.Errorf("sink %s: tls=%q: must be true or false", u.Redacted(), v)
		}
		if on {
			cfg.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
			if opts.Secrets.TLS != nil {
				cfg.TLS = opts.Secrets.TLS.Clone()
			}
		}
	}
	if m := q.Get("sasl"); m != "" {
		mech, err := kafkaSASL(u, m, opts.Secrets)
		if err != nil {
			return cfg, err
		}
		cfg.SASL = mech
	} else if u.User != nil {
		return cfg, fmt.Errorf("sink %s: a user name needs sasl=%s", u.Redacted(), strings.Join(KafkaSASLMechanisms, "|"))
	}
	for _, o := range []struct {
		name string
		max  int
		to   *int
	}{{"partitions", 10000, &cfg.Partitions}, {"replication", 100, &cfg.Replication}} {
		if v := q.Get(o.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > o.max {
				return cfg, fmt.Errorf("sink %s: %s=%q: must be between 1 and %d", u.Redacted(), o.name, v, o.max)
			}
			*o.to = n
		}
	}
	return cfg, nil
}

// kafkaSASL is the mechanism of a sasl= option: the user name from the
// URI or KAFKA_SASL_USERNAME, the password from KAFKA_SASL_PASSWORD only.
func kafkaSASL(u *url.URL, name string, sec Secrets) (sasl.Mechanism, error) {
	user := sec.KafkaSASLUsername
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	if user == "" {
		return nil, fmt.Errorf("sink %s: sasl=%s needs a user name: kafka://USER@HOST:PORT/TOPIC, or KAFKA_SASL_USERNAME in the worker's environment", u.Redacted(), name)
	}
	if sec.KafkaSASLPassword == "" {
		return nil, fmt.Errorf("sink %s: sasl=%s needs KAFKA_SASL_PASSWORD in the worker's environment (a sink URI never carries a password)", u.Redacted(), name)
	}
	switch strings.ToLower(name) {
	case "plain":
		return plain.Mechanism{Username: user, Password: sec.KafkaSASLPassword}, nil
	case "scram-sha-256":
		return scram.Mechanism(scram.SHA256, user, sec.KafkaSASLPassword)
	case "scram-sha-512":
		return scram.Mechanism(scram.SHA512, user, sec.KafkaSASLPassword)
	}
	return nil, fmt.Errorf("sink %s: sasl=%q: must be one of %s", u.Redacted(), name, strings.Join(KafkaSASLMechanisms, ", "))
}

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

	"github.com/segmentio/kafka-go/sasl"
	"github.com/segmentio/kafka-go/sasl/plain"
	"github.com/segmentio/kafka-go/sasl/scram"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/tlsconf"
)

// Options are the settings Open takes from outside the sink URI.
type Options struct {
	// Campaign names WARC files and their warcinfo record.
	Campaign string
	// BodyCap is the campaign's body cap (0: none); the max_body of
	// Kafka and PostgreSQL sinks follows it when their URI does not say.
	BodyCap int64
	// KafkaBrokers ("host:port,host:port", the worker's KAFKA_BROKERS) are
	// the brokers of a kafka:///TOPIC URI that names none (the default
	// sink); a URI that names its brokers keeps them.
	KafkaBrokers string
	// Table is the PostgreSQL table (default drover_pages); a table= query
	// parameter of the URI wins.
	Table string
	// WARCMaxFileSize rotates WARC files (default 1 GB).
	WARCMaxFileSize int64
	// Metrics, when set, times and counts every sink OpenAll opens.
	Metrics *Metrics
	// Secrets are what a sink URI must not carry: they come from the
	// worker's environment.
	Secrets Secrets
}

// Secrets are the sinks' credentials and TLS trust, from the worker's (or
// the starter's, for its checks) environment: a campaign's config is the
// workflow's input, which Temporal keeps in its history and the Web UI
// shows, so it never carries them.
type Secrets struct {
	// KafkaSASLUsername and KafkaSASLPassword authenticate a kafka:// sink
	// with ?sasl= (KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD); a user name
	// in the URI wins over KafkaSASLUsername.
	KafkaSASLUsername string
	KafkaSASLPassword string
	// TLS is the client config of a kafka:// sink with ?tls=true (the
	// CAs of DROVER_TLS_CA); nil trusts the system's CAs.
	TLS *tls.Config
}

// Open opens the sink a URI names, after campaign.CheckSinkURI accepts it
// (a URI carrying a password is refused):
//
//	kafka://HOST:PORT[,HOST:PORT...]/TOPIC[?OPTIONS]  (kafka:///TOPIC: opts.KafkaBrokers)
//	warc:DIR
//	postgres://USER@HOST:PORT/DB[?table=NAME&sslmode=...]  (postgresql:// too)
//
// The Kafka options (KafkaOptions lists them): compression=none|gzip|snappy|
// lz4|zstd (default none); create=true creates a missing topic (default
// false: a missing topic is an error wrapping ErrTopicMissing);
// partitions=N (default 8) and replication=N (default: the broker's
// default.replication.factor) of a created topic. An unknown option is an
// error. A PostgreSQL URI takes table=NAME (default drover_pages, created
// if missing); its other parameters go to pgx (sslmode, ...).
//
// An unreachable service is an error wrapping ErrUnreachable that names the
// address tried and how to start the service.
func Open(ctx context.Context, uri string, opts Options) (Sink, error) {
	if err := campaign.CheckSinkURI(uri); err != nil {
		return nil, err
	}
	if dir, ok := strings.CutPrefix(uri, "warc:"); ok {
		return orNil(NewWARC(WARCConfig{Dir: dir, Campaign: opts.Campaign, MaxFileSize: opts.WARCMaxFileSize}))
	}
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("sink %q: %w", uri, err)
	}
	switch u.Scheme {
	case "kafka":
		cfg, err := kafkaConfig(u, opts)
		if err != nil {
			return nil, err
		}
		if len(cfg.Brokers) == 0 {
			return nil, fmt.Errorf("sink %s names no brokers and KAFKA_BROKERS is not set", u.Redacted())
		}
		return orNil(NewKafka(ctx, cfg))
	case "postgres", "postgresql":
		cfg, err := postgresConfig(u, opts)
		if err != nil {
			return nil, err
		}
		return orNil(NewPostgres(ctx, cfg))
	}
	return nil, fmt.Errorf("sink %q: unknown kind", u.Redacted())
}

// SecretsFrom takes the sinks' secrets from a process's settings
// (tlsconf.FromEnv).
func SecretsFrom(o tlsconf.Options) (Secrets, error) {
	tc, err := o.ServiceTLS()
	if err != nil {
		return Secrets{}, err
	}
	return Secrets{KafkaSASLUsername: o.KafkaSASLUsername, KafkaSASLPassword: o.KafkaSASLPassword, TLS: tc}, nil
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

// parseMaxBody reads a max_body= option: bytes, 1 KiB to MaxMaxBody; 0
// when v is empty (the default).
func parseMaxBody(u *url.URL, v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1024 || n > MaxMaxBody {
		return 0, fmt.Errorf("sink %s: max_body=%q: must be a number of bytes from 1024 to %d", u.Redacted(), v, MaxMaxBody)
	}
	return n, nil
}

// postgresConfig reads a postgres:// URI: its table= and max_body=
// parameters are ours, the others are pgx's.
func postgresConfig(u *url.URL, opts Options) (PostgresConfig, error) {
	q := u.Query()
	table := opts.Table
	if t := q.Get("table"); t != "" {
		table = t
	}
	cfg := PostgresConfig{Table: table, BodyCap: opts.BodyCap}
	var err error
	if cfg.MaxBody, err = parseMaxBody(u, q.Get("max_body")); err != nil {
		return cfg, err
	}
	q.Del("table") // pgx would send them to the server as settings
	q.Del("max_body")
	v := *u
	v.RawQuery = q.Encode()
	cfg.URI = v.String()
	return cfg, nil
}

// orNil keeps a constructor's typed nil pointer out of the Sink interface,
// where it would compare non-nil.
func orNil[S Sink](s S, err error) (Sink, error) {
	if err != nil {
		return nil, err
	}
	return s, nil
}

// OpenAll opens every URI; with several it returns a Multi. If one fails,
// those already open are closed.
func OpenAll(ctx context.Context, uris []string, opts Options) (Sink, error) {
	if len(uris) == 0 {
		return nil, errors.New("sink: no sink URI given")
	}
	var m Multi
	for _, u := range uris {
		s, err := Open(ctx, u, opts)
		if err != nil {
			_ = m.Close()
			return nil, err
		}
		m = append(m, opts.Metrics.Metered(s, opts.Campaign, Kind(u)))
	}
	if len(m) == 1 {
		return m[0], nil
	}
	return m, nil
}

// Multi stores each page in every sink at once; Store returns nil only when
// all of them acknowledged it. A page that one sink took and another refused
// is stored again on retry: sinks key by URL so that readers can drop the
// duplicate.
//
// A page whose body is larger than a Kafka or PostgreSQL sink's max_body
// is stored in the WARC sinks first, and in the others once those have
// it, so that their pointer record names the WARC record (page.Page.WARC);
// when a WARC sink fails, the others are not tried (the page is retried
// as a whole).
type Multi []Sink

// Store stores p in every sink concurrently (WARC sinks first when p's
// body is over another's limit) and joins their errors.
func (m Multi) Store(ctx context.Context, p *page.Page) error {
	if first, rest := m.order(p); len(first) > 0 {
		if err := first.storeAll(ctx, p); err != nil {
			return err
		}
		return rest.storeAll(ctx, p)
	}
	return m.storeAll(ctx, p)
}

// order splits m into its WARC sinks and the others when p's body is
// larger than one sink's BodyLimit; both are nil otherwise.
func (m Multi) order(p *page.Page) (first, rest Multi) {
	size, over := p.BodySize(), false
	for _, s := range m {
		if bl, ok := s.(bodyLimited); ok && size > bl.BodyLimit() {
			over = true
		}
	}
	if !over {
		return nil, nil
	}
	for _, s := range m {
		if bp, ok := s.(bodyPlacer); ok && bp.placesBody() {
			first = append(first, s)
		} else {
			rest = append(rest, s)
		}
	}
	return first, rest
}

// storeAll stores p in every sink concurrently and joins their errors.
func (m Multi) storeAll(ctx context.Context, p *page.Page) error {
	errs := make([]error, len(m))
	done := make(chan struct{}, len(m))
	for i, s := range m {
		go func() {
			errs[i] = s.Store(ctx, p)
			done <- struct{}{}
		}()
	}
	for range m {
		<-done
	}
	return errors.Join(errs...)
}

// Close closes every sink and joins their errors.
func (m Multi) Close() error {
	var errs []error
	for _, s := range m {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

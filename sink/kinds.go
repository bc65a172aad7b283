package sink

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/drover-crawl/drover/sink/sinkuri"
)

// kind is what this package does with one kind of sink of sinkuri.Kinds:
// open it, and check before a campaign starts that it will take pages.
// A new kind of sink is an entry of sinkuri.Kinds (its URI's form), a file
// of this package with its open and check, and an entry of kinds;
// TestEveryKindHasOneEntry holds the two tables together.
type kind struct {
	uri   *sinkuri.Kind
	open  func(ctx context.Context, uri string, opts Options) (Sink, error)
	check func(ctx context.Context, uri string, opts Options) error
}

// kinds are the sinks Open opens and Check checks.
var kinds = []kind{
	{uri: sinkuri.Kafka, open: openKafka, check: checkKafka},
	{uri: sinkuri.WARC, open: openWARC, check: checkWARC},
	{uri: sinkuri.Postgres, open: openPostgres, check: checkPostgres},
}

// kindOf is the kind of a URI that sinkuri.Check accepts.
func kindOf(uri string) (kind, error) {
	if err := sinkuri.Check(uri); err != nil {
		return kind{}, err
	}
	k := sinkuri.Lookup(uri)
	for _, e := range kinds {
		if e.uri == k {
			return e, nil
		}
	}
	return kind{}, fmt.Errorf("sink %q: package sink has no entry for kind %s in its kinds table; add one", sinkuri.Redact(uri), k.Name)
}

// parseURI parses the URI of a kind that is a URL (kafka://, postgres://).
func parseURI(uri string) (*url.URL, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return nil, fmt.Errorf("sink %q: %w", sinkuri.Redact(uri), err)
	}
	return u, nil
}

// Kind is a sink URI's kind for a label: the name of its sinkuri kind
// (postgresql:// reads as postgres), or "other".
func Kind(uri string) string {
	if k := sinkuri.Lookup(uri); k != nil {
		return k.Name
	}
	return "other"
}

// Open opens the sink a URI names, after sinkuri.Check accepts it
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
	k, err := kindOf(uri)
	if err != nil {
		return nil, err
	}
	return k.open(ctx, uri, opts)
}

// checkDialTimeout bounds each connection Check makes.
const checkDialTimeout = 3 * time.Second

// Check tells, before a campaign starts, whether the sink a URI names will
// take pages, as far as can be seen from here, and writes nothing:
//
//   - kafka: a broker answers, the URI's options are valid, the topic
//     exists (or the URI has create=true and the broker accepts creating
//     it, asked with CreateTopics' validate_only) and takes a record of
//     opts.BodyCap. A kafka:///TOPIC URI is checked on opts.KafkaBrokers,
//     and not at all without them.
//   - warc: the directory is writable, or its nearest existing parent is,
//     so that a worker can create it.
//   - postgres: the server answers and the table can be created, or an
//     older drover's table given the columns it lacks (CREATE TABLE IF NOT
//     EXISTS and ALTER TABLE in a transaction that is rolled back).
//
// The starter calls it so that a sink that cannot work is one clear line
// rather than fetchers restarting. The error names the sink (its URI,
// password redacted) and the fix; it wraps ErrTopicMissing,
// ErrUnreachable or ErrRecordTooLarge where they apply.
func Check(ctx context.Context, uri string, opts Options) error {
	k, err := kindOf(uri)
	if err != nil {
		return err
	}
	if err := k.check(ctx, uri, opts); err != nil {
		return fmt.Errorf("%s sink %s: %w", k.uri.Name, sinkuri.Redact(uri), err)
	}
	return nil
}

package sink

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/drover-crawl/drover/campaign"
)

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
	if err := campaign.CheckSinkURI(uri); err != nil {
		return err
	}
	var kind string
	var err error
	if dir, ok := strings.CutPrefix(uri, "warc:"); ok {
		kind, err = "warc", checkWARC(dir)
	} else {
		u, perr := url.Parse(uri)
		if perr != nil {
			return fmt.Errorf("sink %q: %w", campaign.Redact(uri), perr)
		}
		switch u.Scheme {
		case "kafka":
			kind, err = "kafka", checkKafka(ctx, u, opts)
		case "postgres", "postgresql":
			kind, err = "postgres", checkPostgres(ctx, u, opts)
		}
	}
	if err != nil {
		return fmt.Errorf("%s sink %s: %w", kind, campaign.Redact(uri), err)
	}
	return nil
}

func checkKafka(ctx context.Context, u *url.URL, opts Options) error {
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

// checkWARC checks that dir, or its nearest existing parent, is a directory
// this process can create a file in.
func checkWARC(dir string) error {
	p := filepath.Clean(dir)
	for {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				return fmt.Errorf("%s is not a directory; make warc:DIR a directory the workers can write, or pick another", p)
			}
			break
		}
		// A missing directory, or a file where a directory should be:
		// look further up.
		parent := filepath.Dir(p)
		if !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)) || parent == p {
			return fmt.Errorf("%v; make warc:DIR a directory the workers can write, or pick another", err)
		}
		p = parent
	}
	f, err := os.CreateTemp(p, ".drover-check-*")
	if err != nil {
		return fmt.Errorf("cannot write in %s: %v; make it writable by the workers, or pick another warc:DIR", p, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

func checkPostgres(ctx context.Context, u *url.URL, opts Options) error {
	cfg, err := postgresConfig(u, opts)
	if err != nil {
		return err
	}
	s, err := newPostgres(cfg)
	if err != nil {
		return err
	}
	s.pgcfg.ConnectTimeout = checkDialTimeout
	conn, err := s.connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres %s: %w", s.addr, err)
	}
	// Rolled back on purpose: a check changes nothing.
	defer func() { _ = tx.Rollback(context.Background()) }()
	if err := s.ddl(ctx, tx); err != nil {
		return fmt.Errorf("postgres %s: cannot create table %s: %w; create it, grant the workers' role CREATE on its schema, or pick another ?table=",
			s.addr, s.cfg.Table, err)
	}
	return nil
}

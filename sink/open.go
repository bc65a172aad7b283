package sink

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"

	"github.com/drover-crawl/drover/campaign"
)

// Options are what Open needs beyond the URI.
type Options struct {
	Campaign string
	BodyCap  int64
	// KafkaBrokers are the default brokers (KAFKA_BROKERS) for a kafka URI
	// without a host.
	KafkaBrokers string
}

// Open opens the sink a URI names: kafka://HOST:PORT/TOPIC (query:
// compression=NAME, create=true), warc:DIR, postgres://..., or mem: (an
// in-memory sink for tests).
func Open(ctx context.Context, uri string, opts Options) (Sink, error) {
	if uri == "mem:" {
		return NewMemory(), nil
	}
	if err := campaign.CheckSinkURI(uri); err != nil {
		return nil, err
	}
	switch {
	case strings.HasPrefix(uri, "kafka://"):
		u, err := url.Parse(uri)
		if err != nil {
			return nil, fmt.Errorf("sink %q: %w", uri, err)
		}
		brokers := u.Host
		if brokers == "" {
			brokers = opts.KafkaBrokers
		}
		q := u.Query()
		return NewKafka(ctx, KafkaConfig{
			Brokers:     strings.Split(brokers, ","),
			Topic:       strings.Trim(u.Path, "/"),
			BodyCap:     opts.BodyCap,
			Compression: q.Get("compression"),
			CreateTopic: q.Get("create") == "true",
		})
	}
	return nil, fmt.Errorf("sink %q: not supported by this build", uri)
}

// OpenAll opens every sink; several make a Multi.
func OpenAll(ctx context.Context, uris []string, opts Options) (Sink, error) {
	var sinks []Sink
	for _, uri := range uris {
		s, err := Open(ctx, uri, opts)
		if err != nil {
			for _, o := range sinks {
				o.Close()
			}
			return nil, err
		}
		sinks = append(sinks, s)
	}
	if len(sinks) == 1 {
		return sinks[0], nil
	}
	return Multi(sinks), nil
}

// Multi stores every page in each of its sinks, concurrently; Store returns
// nil only when every one of them acknowledged.
type Multi []Sink

// Store implements Sink.
func (m Multi) Store(ctx context.Context, p *Page) error {
	errs := make([]error, len(m))
	var wg sync.WaitGroup
	for i, s := range m {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Store(ctx, p)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close implements Sink.
func (m Multi) Close() error {
	var errs []error
	for _, s := range m {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

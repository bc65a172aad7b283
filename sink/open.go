package sink

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strconv"

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

// SecretsFrom takes the sinks' secrets from a process's settings
// (tlsconf.FromEnv).
func SecretsFrom(o tlsconf.Options) (Secrets, error) {
	tc, err := o.ServiceTLS()
	if err != nil {
		return Secrets{}, err
	}
	return Secrets{KafkaSASLUsername: o.KafkaSASLUsername, KafkaSASLPassword: o.KafkaSASLPassword, TLS: tc}, nil
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

package sink

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Check tells whether the service a sink URI names answers, from here: a
// TCP connection to each Kafka broker or to PostgreSQL. The starter calls it
// before starting a campaign, so that an unreachable sink is one clear line
// rather than fetchers restarting. A warc: sink is local to each worker and
// is not checked.
func Check(ctx context.Context, uri, defaultBrokers string) error {
	var addrs []string
	var kind, hint string
	switch {
	case strings.HasPrefix(uri, "kafka://"):
		u, err := url.Parse(uri)
		if err != nil {
			return fmt.Errorf("sink %q: %w", uri, err)
		}
		brokers := u.Host
		if brokers == "" {
			brokers = defaultBrokers
		}
		if brokers == "" {
			return nil // the workers' KAFKA_BROKERS: not known here
		}
		addrs, kind, hint = strings.Split(brokers, ","), "Kafka", "start the dev stack with `make dev`, or name a reachable broker in --sink"
	case strings.HasPrefix(uri, "postgres://"), strings.HasPrefix(uri, "postgresql://"):
		u, err := url.Parse(uri)
		if err != nil {
			return fmt.Errorf("sink %q: %w", u.Redacted(), err)
		}
		host := u.Host
		if host == "" {
			host = "127.0.0.1:5432"
		} else if u.Port() == "" {
			host = net.JoinHostPort(u.Hostname(), "5432")
		}
		addrs, kind, hint = []string{host}, "PostgreSQL", "start it (Debian: pg_ctlcluster 15 main start) or fix --sink"
	default:
		return nil
	}
	var d net.Dialer
	for _, a := range addrs {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		c, err := d.DialContext(cctx, "tcp", a)
		cancel()
		if err != nil {
			return fmt.Errorf("%s at %s unreachable: %v (%s)", kind, a, err, hint)
		}
		c.Close()
	}
	return nil
}

package temporalnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/drover-crawl/drover/tlsconf"
)

// Bounds of DialTemporal's wait.
const (
	// temporalAttemptTimeout bounds one dial and namespace check.
	temporalAttemptTimeout = 5 * time.Second
	// temporalMaxBackoff caps the wait between attempts.
	temporalMaxBackoff = 10 * time.Second
	// namespaceGrace is how long a namespace the server says it does not
	// have is waited for, from the server's first answer: a dev server
	// registers its namespaces as it starts, and a production one may be
	// set up by a job started with the workers.
	namespaceGrace = 15 * time.Second
)

// ErrTemporalConfig marks an error DialTemporal does not wait out: a
// malformed address, a namespace the server does not have, credentials it
// refuses. A process exits on it; on anything else it keeps waiting.
var ErrTemporalConfig = errors.New("temporal configuration error")

// DialTemporal connects to Temporal at opts.HostPort and checks that
// opts.Namespace exists. While the server does not answer (not started yet,
// restarting, a network blip) it waits, with backoff (1 s doubling to 10 s,
// ±20% jitter) and a warning in log per attempt, until ctx ends. It returns
// at once an error wrapping ErrTemporalConfig on a configuration error, so
// that a worker started before its server (compose, Kubernetes) waits and a
// misconfigured one says why and exits.
func DialTemporal(ctx context.Context, opts client.Options, log *slog.Logger) (client.Client, error) {
	if err := checkTemporalAddr(opts.HostPort); err != nil {
		return nil, err
	}
	ns := opts.Namespace
	if ns == "" {
		ns = client.DefaultNamespace
	}
	var firstAnswer time.Time
	for wait := time.Second; ; wait = min(2*wait, temporalMaxBackoff) {
		c, err := dialOnce(ctx, opts, ns)
		if err == nil {
			return c, nil
		}
		var nf *serviceerror.NamespaceNotFound
		switch {
		case errors.Is(err, ErrTemporalConfig):
			return nil, err
		case errors.As(err, &nf):
			if firstAnswer.IsZero() {
				firstAnswer = time.Now()
			}
			if time.Since(firstAnswer) > namespaceGrace {
				return nil, fmt.Errorf("%w: Temporal at %s has no namespace %q (set TEMPORAL_NAMESPACE, or create it: temporal operator namespace create %s)",
					ErrTemporalConfig, opts.HostPort, ns, ns)
			}
		}
		d := jitter(wait)
		if log != nil {
			log.Warn("waiting for Temporal", "address", opts.HostPort, "namespace", ns, "err", err, "retry_in", d.Round(time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("Temporal at %s unreachable: %w", opts.HostPort, err)
		case <-time.After(d):
		}
	}
}

// dialOnce dials and describes the namespace, bounded by
// temporalAttemptTimeout.
func dialOnce(ctx context.Context, opts client.Options, ns string) (client.Client, error) {
	actx, cancel := context.WithTimeout(ctx, temporalAttemptTimeout)
	defer cancel()
	c, err := client.DialContext(actx, opts)
	if err != nil {
		return nil, classify(err, opts.ConnectionOptions.TLS)
	}
	_, err = c.WorkflowService().DescribeNamespace(actx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
	if err != nil {
		c.Close()
		return nil, classify(err, opts.ConnectionOptions.TLS)
	}
	return c, nil
}

// classify wraps ErrTemporalConfig around the errors waiting cannot cure.
func classify(err error, tc *tls.Config) error {
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied, codes.InvalidArgument:
		return fmt.Errorf("%w: %w", ErrTemporalConfig, err)
	}
	switch hint, definite := tlsconf.TemporalHint(err, tc); {
	case definite:
		return fmt.Errorf("%w: %s: %w", ErrTemporalConfig, hint, err)
	case hint != "":
		return fmt.Errorf("%s: %w", hint, err)
	}
	return err
}

// checkTemporalAddr refuses an address the SDK could never dial: it is
// host:port, optionally behind the SDK's "dns:///" prefix.
func checkTemporalAddr(addr string) error {
	hp := strings.TrimPrefix(addr, "dns:///")
	host, port, err := net.SplitHostPort(hp)
	if err == nil {
		if p, perr := strconv.Atoi(port); perr != nil || p < 1 || p > 65535 {
			err = fmt.Errorf("port %q is not a number from 1 to 65535", port)
		} else if host == "" || strings.ContainsAny(host, "/@?#") {
			err = fmt.Errorf("host %q is not a host name or IP", host)
		}
	}
	if err != nil {
		return fmt.Errorf("%w: Temporal address %q is not HOST:PORT (TEMPORAL_ADDRESS): %v", ErrTemporalConfig, addr, err)
	}
	return nil
}

// jitter spreads d by ±20%, so that workers started together do not dial
// in step.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
}

// Secure sets o's ConnectionOptions.TLS and Credentials from t's settings
// (tlsconf.TemporalFromEnv). Nothing is changed when t gives none
// (plaintext, as a dev server wants); an API key alone turns TLS on with
// the system's CAs.
func Secure(o *client.Options, t tlsconf.Temporal) error {
	cfg, err := t.TLSConfig()
	if err != nil || cfg == nil {
		return err
	}
	o.ConnectionOptions.TLS = cfg
	if t.APIKey != "" {
		o.Credentials = client.NewAPIKeyStaticCredentials(t.APIKey)
	}
	return nil
}

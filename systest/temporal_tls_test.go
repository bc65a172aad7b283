package systest_test

import (
	"context"
	"crypto/tls"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/internal/relay"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/node/temporalnode"
	"github.com/drover-crawl/drover/starter/cli"
	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/tlsconf/tlstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tlsProxy terminates TLS (HTTP/2 by ALPN, as gRPC wants) with cfg and
// forwards the bytes to a plaintext backend: a TLS front for the dev
// server, which does not speak TLS itself.
func tlsProxy(t *testing.T, cfg *tls.Config, backend string) string {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	relay.Serve(t, ln, backend, nil)
	return ln.Addr().String()
}

// TestTemporalTLS: the worker's and the starter's Temporal client over TLS
// with a client certificate (mTLS), against the dev server behind a TLS
// front; and the mismatches, each a configuration error (the worker does
// not wait it out) in one line within a bound: TLS to the plaintext dev
// server, plaintext to the TLS front, no client certificate, an untrusted
// server certificate.
func TestTemporalTLS(t *testing.T) {
	testenv.NeedsTemporal(t)
	tmp, err := devstack.StartTemporal(context.Background(), devstack.TemporalOptions{UIPort: -1})
	require.NoError(t, err)
	t.Cleanup(func() { tmp.Stop() })
	pki := tlstest.New(t, "temporal")
	front, err := tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}.Server()
	require.NoError(t, err)
	tlsAddr := tlsProxy(t, front, tmp.Address())

	dial := func(addr string, sec tlsconf.Temporal) (client.Client, error) {
		opts := client.Options{HostPort: addr, Namespace: tmp.Namespace()}
		// dial is called from the subtests too, on their goroutines: a
		// failure here is reported on the test and returned, not FailNow.
		if err := temporalnode.Secure(&opts, sec); !assert.NoError(t, err) {
			return nil, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
		defer cancel()
		return temporalnode.DialTemporal(ctx, opts, nil)
	}
	mtls := tlsconf.Temporal{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}
	c, err := dial(tlsAddr, mtls)
	require.NoError(t, err, "mTLS through the TLS front")
	_, err = c.WorkflowService().ListWorkflowExecutions(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: tmp.Namespace()})
	assert.NoError(t, err, "a call over mTLS")
	c.Close()
	// The starter's client too.
	camps, err := cli.DialTemporal(context.Background(), cli.Env{Env: envconf.Env{TemporalAddress: tlsAddr, TemporalNamespace: tmp.Namespace()}, Temporal: mtls})
	require.NoError(t, err, "starter over mTLS")
	_, err = camps.List(context.Background(), "")
	assert.NoError(t, err, "starter's list over mTLS")
	if cl, ok := camps.(interface{ Close() }); ok {
		cl.Close()
	}

	other := tlstest.New(t, "other")
	for _, tc := range []struct {
		name string
		addr string
		sec  tlsconf.Temporal
		want string
	}{
		{"TLS to the plaintext dev server", tmp.Address(), tlsconf.Temporal{TLS: true}, "does not speak TLS"},
		{"plaintext to the TLS front", tlsAddr, tlsconf.Temporal{}, "speaks TLS and this client does not"},
		{"no client certificate", tlsAddr, tlsconf.Temporal{CA: pki.CA}, "client certificate"},
		{"untrusted server certificate", tlsAddr, tlsconf.Temporal{CA: other.CA, Cert: pki.ClientCert, Key: pki.ClientKey}, "TEMPORAL_TLS_CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			c, err := dial(tc.addr, tc.sec)
			if err == nil {
				c.Close()
				require.FailNow(t, "connected")
			}
			took, werr := time.Since(start), err
			// A client without a certificate may see its write cut before
			// the server's alert arrives: then the hint is a guess, and
			// the worker waits (until the test's bound) saying it.
			config := errors.Is(err, temporalnode.ErrTemporalConfig) || (tc.name == "no client certificate" && strings.Contains(err.Error(), "unreachable"))
			assert.True(t, config, "worker's dial: %v (after %s); want a configuration error saying %q", err, took, tc.want)
			assert.ErrorContains(t, err, tc.want, "worker's dial (after %s); want a configuration error saying it", took)
			assert.LessOrEqual(t, took, 15*time.Second, "worker's dial gave up too late, want within 15s")
			start = time.Now()
			_, err = cli.DialTemporal(context.Background(), cli.Env{Env: envconf.Env{TemporalAddress: tc.addr, TemporalNamespace: tmp.Namespace()}, Temporal: tc.sec})
			if assert.ErrorContains(t, err, tc.want, "starter's dial: want one line saying it") {
				assert.NotContains(t, err.Error(), "\n", "starter's dial: want one line saying %q", tc.want)
			}
			assert.LessOrEqual(t, time.Since(start), 10*time.Second, "starter's dial gave up too late, want within 10s")
			t.Logf("worker: %v (%s)\nstarter: %v", werr, took.Round(time.Millisecond), err)
		})
	}
}

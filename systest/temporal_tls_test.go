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
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/starter/cli"
	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/tlsconf/tlstest"
)

// tlsProxy terminates TLS (HTTP/2 by ALPN, as gRPC wants) with cfg and
// forwards the bytes to a plaintext backend: a TLS front for the dev
// server, which does not speak TLS itself.
func tlsProxy(t *testing.T, cfg *tls.Config, backend string) string {
	t.Helper()
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
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
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tmp.Stop() })
	pki := tlstest.New(t, "temporal")
	front, err := tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}.Server()
	if err != nil {
		t.Fatal(err)
	}
	tlsAddr := tlsProxy(t, front, tmp.Address())

	dial := func(addr string, sec tlsconf.Temporal) (client.Client, error) {
		opts := client.Options{HostPort: addr, Namespace: tmp.Namespace()}
		if err := sec.Apply(&opts); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 12*time.Second)
		defer cancel()
		return node.DialTemporal(ctx, opts, nil)
	}
	mtls := tlsconf.Temporal{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}
	c, err := dial(tlsAddr, mtls)
	if err != nil {
		t.Fatalf("mTLS through the TLS front: %v", err)
	}
	if _, err := c.WorkflowService().ListWorkflowExecutions(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Namespace: tmp.Namespace()}); err != nil {
		t.Errorf("a call over mTLS: %v", err)
	}
	c.Close()
	// The starter's client too.
	camps, err := cli.DialTemporal(context.Background(), cli.Env{Env: envconf.Env{TemporalAddress: tlsAddr, TemporalNamespace: tmp.Namespace()}, Temporal: mtls})
	if err != nil {
		t.Fatalf("starter over mTLS: %v", err)
	}
	if _, err := camps.List(context.Background(), ""); err != nil {
		t.Errorf("starter's list over mTLS: %v", err)
	}
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
				t.Fatal("connected")
			}
			took, werr := time.Since(start), err
			// A client without a certificate may see its write cut before
			// the server's alert arrives: then the hint is a guess, and
			// the worker waits (until the test's bound) saying it.
			config := errors.Is(err, node.ErrTemporalConfig) || (tc.name == "no client certificate" && strings.Contains(err.Error(), "unreachable"))
			if !config || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("worker's dial: %v (after %s); want a configuration error saying %q", err, took, tc.want)
			}
			if took > 15*time.Second {
				t.Errorf("worker's dial gave up after %s, want within 15s", took)
			}
			start = time.Now()
			_, err = cli.DialTemporal(context.Background(), cli.Env{Env: envconf.Env{TemporalAddress: tc.addr, TemporalNamespace: tmp.Namespace()}, Temporal: tc.sec})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("starter's dial: %v; want one line saying %q", err, tc.want)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("starter's dial gave up after %s, want within 10s", took)
			}
			t.Logf("worker: %v (%s)\nstarter: %v", werr, took.Round(time.Millisecond), err)
		})
	}
}

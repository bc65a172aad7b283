package systest_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/tlsconf"
	"github.com/drover-crawl/drover/tlsconf/tlstest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sessionRedialEvery paces the test's fetchers' dials while the scheduler
// is not listening yet, as FetchSession's backoff (from 100 ms) does.
const sessionRedialEvery = 100 * time.Millisecond

// TestTLSSessions runs a scheduler that requires TLS with client
// certificates (mTLS) and crawls a small test web through TLS sessions;
// then it checks that a session without a client certificate, one that
// does not trust the scheduler's CA, and a plaintext one are each refused
// with a clear error, within a bound.
func TestTLSSessions(t *testing.T) {
	pki := tlstest.New(t, "drover")
	serverTLS, err := tlsconf.Options{Cert: pki.ServerCert, Key: pki.ServerKey, ClientCA: pki.CA}.Server()
	require.NoError(t, err)
	token := fmt.Sprintf("tls-token-%d", rand.Int64())
	scfg := frontier.DefaultServerConfig()
	scfg.Token = token
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx := context.Background()
	sched := nodetest.StartScheduler(t, node.SchedulerConfig{Server: scfg, Log: log, TLS: serverTLS})
	addr := sched.Addr()

	clientTLS, err := tlsconf.Options{CA: pki.CA, Cert: pki.ClientCert, Key: pki.ClientKey}.Client()
	require.NoError(t, err)
	cl := session.Client{Token: token, TLS: clientTLS}

	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 25, CrossHost: true, Base: 131})
	cfg := campaign.Config{
		ID: fmt.Sprintf("tls-%d", rand.IntN(1e9)), Seeds: web.Seeds(), PerHostDelay: new(time.Duration),
		AllowPrivate: true, Sinks: []string{"warc:/unused"},
	}.WithDefaults()
	ctl, err := cl.DialControl(ctx, addr)
	require.NoError(t, err, "control session over mTLS")
	t.Cleanup(func() {
		ctl.CloseCampaign(context.Background(), cfg.ID, true)
		ctl.Close()
	})
	n, err := ctl.Seed(ctx, cfg, cfg.Seeds)
	require.NoError(t, err, "seed over mTLS")
	require.Equal(t, len(cfg.Seeds), n, "seed over mTLS: seeds taken")

	// Two fetchers over TLS sessions.
	sk := sink.NewMemory()
	fctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	sessions := make(chan bool, 64)
	for i := range 2 {
		f, err := fetch.New(cfg)
		require.NoError(t, err)
		r := activities.NewRunner(cfg, f, sk, i, "tls-test")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			for fctx.Err() == nil {
				sess, err := cl.DialSession(fctx, addr, fmt.Sprintf("fetcher-%d", i), cfg, cfg.FetcherConcurrency)
				if err != nil {
					time.Sleep(sessionRedialEvery)
					continue
				}
				select {
				case sessions <- true:
				default:
				}
				r.Run(fctx, sess)
			}
		}()
	}
	defer func() { stop(); wg.Wait() }()
	await.For(t, 90*time.Second, 100*time.Millisecond, "every page fetched through TLS sessions", func() error {
		if m := web.Missing(); len(m) > 0 {
			return fmt.Errorf("%d of %d pages never fetched, e.g. %v", len(m), len(web.Pages()), m[:min(3, len(m))])
		}
		return nil
	})
	require.NotZero(t, len(sessions), "no fetcher session was opened")
	stored := map[string]bool{}
	// The last outcomes may still be on their way: the scheduler's count
	// is read over mTLS too.
	await.For(t, 30*time.Second, 100*time.Millisecond, "the scheduler's count over mTLS", func() error {
		st, err := cl.CampaignStats(ctx, []string{addr}, cfg.ID)
		if err != nil {
			return err
		}
		if st.Fetched < int64(len(web.Pages())) {
			return fmt.Errorf("scheduler counted %d pages fetched of %d", st.Fetched, len(web.Pages()))
		}
		return nil
	})
	for _, p := range sk.Pages() {
		stored[p.URL] = true
	}
	for _, u := range web.Pages() {
		assert.True(t, stored[u], "page %s never stored", u)
	}

	refused := func(name string, c session.Client, want ...string) {
		t.Helper()
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		ctl, err := c.DialControl(cctx, addr)
		if !assert.Error(t, err, "%s: a control session was opened", name) {
			ctl.Close()
			return
		}
		assert.LessOrEqual(t, time.Since(start), 15*time.Second, "%s: refused after too long, want within 15s", name)
		msg := err.Error()
		assert.NotContains(t, msg, "\n", "%s: error is not one line: %q", name, msg)
		assert.NotContains(t, msg, token, "%s: error shows the token", name)
		for _, w := range want {
			assert.Contains(t, msg, w, "%s: error does not say %q", name, w)
		}
		t.Logf("%s: %s", name, msg)
	}
	// mTLS: a client that trusts the CA but has no certificate.
	noCert, err := tlsconf.Options{CA: pki.CA}.Client()
	require.NoError(t, err)
	refused("no client certificate", session.Client{Token: token, TLS: noCert}, "certificate", "--tls-cert")
	// A client that does not trust the scheduler's CA.
	other := tlstest.New(t, "other")
	wrongCA, err := tlsconf.Options{CA: other.CA, Cert: pki.ClientCert, Key: pki.ClientKey}.Client()
	require.NoError(t, err)
	refused("untrusted CA", session.Client{Token: token, TLS: wrongCA}, "TLS handshake failed", "certificate")
	// A client certificate from another CA.
	otherCert, err := tlsconf.Options{CA: pki.CA, Cert: other.ClientCert, Key: other.ClientKey}.Client()
	require.NoError(t, err)
	refused("client certificate of another CA", session.Client{Token: token, TLS: otherCert}, "certificate")
	// Plaintext to a TLS scheduler.
	refused("plaintext", session.Client{Token: token}, "DROVER_TLS_CA")
}

// TestSchedulerRefusesPlaintextBeyondLoopback: a scheduler asked to
// listen on a non-loopback address without TLS refuses to start (before
// it binds anything), and starts with InsecurePlaintext.
func TestSchedulerRefusesPlaintextBeyondLoopback(t *testing.T) {
	scfg := frontier.DefaultServerConfig()
	scfg.Token = "a-token-that-is-not-the-dev-token"
	_, err := node.StartScheduler(context.Background(), node.SchedulerConfig{Server: scfg, Listen: "0.0.0.0:0", AMQPURL: amqpURL()})
	const what = "scheduler on 0.0.0.0 without TLS: want a refusal naming --tls-cert and DROVER_INSECURE_PLAINTEXT"
	require.ErrorIs(t, err, tlsconf.ErrPlaintext, what)
	require.ErrorContains(t, err, "--tls-cert", what)
	require.ErrorContains(t, err, "DROVER_INSECURE_PLAINTEXT", what)
}

// TestClientRefusesPlaintextBeyondLoopback: a client does not send the
// token in plaintext to a non-loopback address. It listens on one of the
// machine's non-loopback addresses, if it has one, and checks that the
// client refuses and that not one byte reached the listener.
func TestClientRefusesPlaintextBeyondLoopback(t *testing.T) {
	ip := nonLoopbackIP()
	if ip == nil {
		t.Skip("no non-loopback interface address on this machine (the rule is unit-tested in tlsconf)")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	defer ln.Close()
	// A client that refused before it dialed leaves Accept to its deadline:
	// nothing reached the listener (-1).
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(5 * time.Second))
	got := make(chan int, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		n, _ := io.Copy(io.Discard, c)
		got <- int(n)
	}()
	token := "a-secret-token-for-the-plaintext-test"
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = session.Client{Token: token}.DialControl(ctx, ln.Addr().String())
	require.ErrorIs(t, err, tlsconf.ErrPlaintext, "plaintext session to %s: want a refusal naming DROVER_TLS_CA", ln.Addr())
	require.ErrorContains(t, err, "DROVER_TLS_CA", "plaintext session to %s: want a refusal naming DROVER_TLS_CA", ln.Addr())
	t.Logf("refused: %v", err)
	select {
	case n := <-got:
		require.LessOrEqual(t, n, 0, "bytes reached the listener; the token must not be sent")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the listener did not finish reading within 10 s (accept deadline 5 s, read deadline 3 s)")
	}
}

func nonLoopbackIP() net.IP {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
			return n.IP
		}
	}
	return nil
}

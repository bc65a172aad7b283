package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/textproto"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/urlrule"
)

// timeoutErr is a net.Error that timed out, as a dial or read deadline
// reports it.
type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, err)}
}

func TestClassify(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		reason string
		down   bool
	}{
		{"nil", nil, "", false},
		{"dns not found", &net.DNSError{Err: "no such host", Name: "dead.invalid", IsNotFound: true}, page.ReasonDNS, true},
		{"dns timeout", fmt.Errorf("fetch: %w", &net.DNSError{Err: "i/o timeout", Name: "x", IsTimeout: true}), page.ReasonDNS, true},
		{"refused", errors.Join(opErr("connect", syscall.ECONNREFUSED)), page.ReasonRefused, true},
		{"host unreachable", opErr("connect", syscall.EHOSTUNREACH), page.ReasonUnreachable, true},
		{"net unreachable", opErr("connect", syscall.ENETUNREACH), page.ReasonUnreachable, true},
		{"dial timeout", &net.OpError{Op: "dial", Net: "tcp", Err: timeoutErr{}}, page.ReasonTimeout, true},
		{"response timeout", fmt.Errorf("fetch: %w", context.DeadlineExceeded), page.ReasonTimeout, true},
		{"tls not tls", tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"}, page.ReasonTLS, true},
		{"tls unknown authority", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, page.ReasonTLS, true},
		{"tls bad hostname", x509.HostnameError{Host: "x"}, page.ReasonTLS, true},
		{"tls expired", x509.CertificateInvalidError{Reason: x509.Expired}, page.ReasonTLS, true},
		{"tls alert", &net.OpError{Op: "remote error", Err: errors.New("tls: handshake failure")}, page.ReasonTLS, true},
		{"tls alert error", tls.AlertError(40), page.ReasonTLS, true},
		{"tls closed mid-handshake", &handshakeError{io.EOF}, page.ReasonTLS, true},
		{"tls handshake timeout", &handshakeError{context.DeadlineExceeded}, page.ReasonTimeout, true},
		{"reset before response", opErr("read", syscall.ECONNRESET), page.ReasonReset, true},
		{"eof before response", fmt.Errorf("fetch: %w", io.EOF), page.ReasonReset, true},
		{"broken pipe", opErr("write", syscall.EPIPE), page.ReasonReset, true},
		{"reset after response began", &afterResponse{opErr("read", syscall.ECONNRESET)}, page.ReasonReset, false},
		{"eof mid body", fmt.Errorf("x: %w", &afterResponse{io.ErrUnexpectedEOF}), page.ReasonReset, false},
		{"timeout mid body", &afterResponse{context.DeadlineExceeded}, page.ReasonTimeout, false},
		{"malformed status line", &afterResponse{errors.New(`malformed HTTP response "SSH-2.0"`)}, page.ReasonProtocol, false},
		{"malformed header", &afterResponse{textproto.ProtocolError("malformed MIME header")}, page.ReasonProtocol, false},
		{"head too large", &afterResponse{errors.New("net/http: server response headers exceeded 131072 bytes; aborted")}, page.ReasonTooLarge, false},
		{"guard", &GuardError{IP: netip.MustParseAddr("127.0.0.1"), Class: "loopback"}, page.ReasonGuard, false},
		{"robots", ErrRobots, page.ReasonRobots, false},
		{"redirect hops", ErrRedirectHops, page.ReasonRedirect, false},
		{"url too long", fmt.Errorf("invalid url: %w", urlrule.ErrURLTooLong), page.ReasonTrap, false},
		{"invalid url", fmt.Errorf("invalid url: %w", urlrule.ErrInvalidURL), page.ReasonInvalid, false},
		{"bad scheme", urlrule.ErrScheme, page.ReasonInvalid, false},
		{"503", &StatusError{Code: 503, Status: "503 Service Unavailable"}, page.Reason5xx, false},
		{"429", &StatusError{Code: 429, Status: "429 Too Many Requests"}, page.Reason4xx, false},
		{"bare ErrStatus", ErrStatus, page.Reason5xx, false},
		{"canceled", context.Canceled, page.ReasonOther, false},
		{"unknown", errors.New("something else"), page.ReasonOther, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			reason, down := Classify(c.err)
			assert.Equal(t, c.reason, reason)
			assert.Equal(t, c.down, down)
		})
	}
}

func TestStatusErrorIsErrStatus(t *testing.T) {
	err := fmt.Errorf("x: %w", &StatusError{Code: 503, Status: "503 Service Unavailable"})
	assert.True(t, errors.Is(err, ErrStatus))
	assert.Equal(t, "x: retryable status: 503 Service Unavailable", err.Error())
}

func TestScopeClass(t *testing.T) {
	for in, want := range map[string]string{
		"":                        "",
		urlrule.ReasonOutOfScope:  page.ReasonScope,
		urlrule.ReasonDepth:       page.ReasonScope,
		urlrule.ReasonExcluded:    page.ReasonScope,
		urlrule.ReasonScheme:      page.ReasonScope,
		urlrule.ReasonTooLong:     page.ReasonTrap,
		urlrule.ReasonSegments:    page.ReasonTrap,
		urlrule.ReasonRepeats:     page.ReasonTrap,
		urlrule.ReasonGenerated:   page.ReasonTrap,
		urlrule.ReasonInvalidHost: page.ReasonInvalid,
	} {
		assert.Equal(t, want, ScopeClass(in), in)
	}
}

func TestTimeoutsValidate(t *testing.T) {
	require.True(t, DefaultTimeouts().Validate() == nil)
	d := DefaultTimeouts()
	// A silent host fails within 30 s with the defaults, whichever phase
	// it is silent in.
	for _, phase := range []time.Duration{d.DNS, d.Connect, d.TLSHandshake, d.ResponseHeader} {
		assert.True(t, phase <= 30*time.Second && phase < d.Response, phase)
	}
	bad := DefaultTimeouts()
	bad.ResponseHeader = 0
	err := bad.Validate()
	require.True(t, err != nil && strings.Contains(err.Error(), "ResponseHeader"), err)
	_, err = New(testConfig("http://127.0.0.1"), WithTimeouts(bad))
	assert.True(t, err != nil, "New accepted a zero timeout")
}

// shortTimeouts make a peer that is silent in any phase fail in a fraction
// of a second, by that phase's timeout: the whole-response timeout is far
// longer, so that a phase whose timeout does not apply shows.
func shortTimeouts() Timeouts {
	return Timeouts{DNS: 300 * time.Millisecond, Connect: 300 * time.Millisecond, TLSHandshake: 300 * time.Millisecond,
		ResponseHeader: 300 * time.Millisecond, Response: 10 * time.Second}
}

// phaseBound is how long a fetch may take when a phase timeout applies.
const phaseBound = 5 * time.Second

// listen returns a loopback listener closed at the end of the test.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.True(t, err == nil, err)
	t.Cleanup(func() { ln.Close() })
	return ln
}

// refusedAddr is a loopback port nothing listens on: bound, then closed.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.True(t, err == nil, err)
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// serve runs handle on every connection ln accepts, each in a goroutine of
// its own, and closes the connection after; it returns ln's address.
func serve(ln net.Listener, handle func(c net.Conn)) string {
	go func() {
		for c, err := ln.Accept(); err == nil; c, err = ln.Accept() {
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// silentAddr accepts connections and never writes; it holds them until the
// test ends.
func silentAddr(t *testing.T) string {
	ln := listen(t)
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return serve(ln, func(net.Conn) {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
		}
	})
}

// connAddr runs handle on every accepted connection, without reading
// first (rawServer reads the request first).
func connAddr(t *testing.T, handle func(c *net.TCPConn)) string {
	return serve(listen(t), func(c net.Conn) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		handle(c.(*net.TCPConn))
	})
}

// blackholeAddr is a loopback port whose listen queue is full and never
// accepted from, so that a connect gets no answer (as a dropped SYN). It
// skips the test where the platform answers anyway.
func blackholeAddr(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.True(t, err == nil, err)
	t.Cleanup(func() { syscall.Close(fd) })
	require.True(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}) == nil)
	require.True(t, syscall.Listen(fd, 0) == nil)
	sa, err := syscall.Getsockname(fd)
	require.True(t, err == nil, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for range 16 {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr // the queue is full: the next connect hangs too
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Skip("this platform accepts connects past a full listen queue")
	return ""
}

// silentUDP is a DNS server that never answers.
func silentUDP(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.True(t, err == nil, err)
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

// resetAfter is the URL of a raw server that answers with head, then
// resets the connection (a close with RST) 50 ms later.
func resetAfter(head string) func(*testing.T) string {
	return func(t *testing.T) string {
		return rawServer(t, func(c *net.TCPConn) {
			io.WriteString(c, head)
			time.Sleep(50 * time.Millisecond)
			c.SetLinger(0)
		}) + "/"
	}
}

// TestFetchFailureReasons fetches from a loopback peer of each kind and
// checks the reason, HostDown and that a connection-level failure is
// retried, then recorded on the last attempt with the same reason.
func TestFetchFailureReasons(t *testing.T) {
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(tlsSrv.Close)
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0)
	dnsAddr := silentUDP(t)
	hugeHead := rawServer(t, func(c *net.TCPConn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("x", rawCap+1)+"\r\n\r\n")
	})
	trickle := rawServer(t, func(c *net.TCPConn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
		for range 50 {
			if _, err := c.Write([]byte("x")); err != nil {
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
	cases := []struct {
		name    string
		url     func(t *testing.T) string
		opts    []Option
		reason  string
		down    bool
		errText string // in Err, to tell which timeout fired
	}{
		{name: "unresolvable name", url: func(*testing.T) string { return "http://dead.invalid/" }, reason: page.ReasonDNS, down: true},
		{name: "silent dns server", url: func(*testing.T) string { return "http://dead.invalid/" },
			opts: []Option{WithResolver(&net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "udp", dnsAddr)
			}})},
			reason: page.ReasonDNS, down: true, errText: "timeout"},
		{name: "refused port", url: func(t *testing.T) string { return "http://" + refusedAddr(t) + "/" }, reason: page.ReasonRefused, down: true},
		{name: "connect timeout", url: func(t *testing.T) string { return "http://" + blackholeAddr(t) + "/" }, reason: page.ReasonTimeout, down: true, errText: "dial"},
		{name: "silent listener", url: func(t *testing.T) string { return "http://" + silentAddr(t) + "/" }, reason: page.ReasonTimeout, down: true, errText: "awaiting response headers"},
		{name: "silent listener https", url: func(t *testing.T) string { return "https://" + silentAddr(t) + "/" }, reason: page.ReasonTimeout, down: true, errText: "tls handshake"},
		{name: "tls to garbage", url: func(t *testing.T) string {
			return "https://" + connAddr(t, func(c *net.TCPConn) { io.WriteString(c, "SSH-2.0-OpenSSH_9.0\r\n") }) + "/"
		}, reason: page.ReasonTLS, down: true, errText: "does not look like a TLS handshake"},
		{name: "tls closed mid-handshake", url: func(t *testing.T) string {
			return "https://" + connAddr(t, func(c *net.TCPConn) { c.Read(make([]byte, 1)) }) + "/"
		}, reason: page.ReasonTLS, down: true, errText: "tls handshake"},
		{name: "tls bad certificate", url: func(*testing.T) string { return tlsSrv.URL + "/" }, reason: page.ReasonTLS, down: true, errText: "certificate"},
		{name: "reset before response", url: func(t *testing.T) string { return rawServer(t, func(c *net.TCPConn) { c.SetLinger(0) }) + "/" }, reason: page.ReasonReset, down: true},
		{name: "closed before response", url: func(t *testing.T) string { return rawServer(t, func(c *net.TCPConn) {}) + "/" }, reason: page.ReasonReset, down: true},
		{name: "reset mid head", url: resetAfter("HTTP/1.1 200 OK\r\n"), reason: page.ReasonReset, down: false},
		{name: "reset mid body", url: resetAfter("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n<html>"), reason: page.ReasonReset, down: false},
		{name: "not http", url: func(t *testing.T) string {
			return rawServer(t, func(c *net.TCPConn) { io.WriteString(c, "SSH-2.0-OpenSSH_9.0\r\n\r\n") }) + "/"
		}, reason: page.ReasonProtocol, down: false},
		{name: "head too large", url: func(*testing.T) string { return hugeHead + "/" }, reason: page.ReasonTooLarge, down: false},
		{name: "body too slow", url: func(*testing.T) string { return trickle + "/" }, reason: page.ReasonTimeout, down: false,
			opts: []Option{WithTimeouts(Timeouts{DNS: time.Second, Connect: time.Second, TLSHandshake: time.Second, ResponseHeader: time.Second, Response: time.Second})}},
		{name: "503", url: func(t *testing.T) string {
			return statusServer(t, http.StatusServiceUnavailable)
		}, reason: page.Reason5xx, down: false},
		{name: "429", url: func(t *testing.T) string {
			return statusServer(t, http.StatusTooManyRequests)
		}, reason: page.Reason4xx, down: false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := c.url(t)
			cfg := testConfig("http://127.0.0.1")
			cfg.AllowPrivate = true
			cfg.Seeds = []string{u}
			f, err := New(cfg, append([]Option{WithTimeouts(shortTimeouts())}, c.opts...)...)
			require.True(t, err == nil, err)
			t.Cleanup(f.Close)

			start := time.Now()
			res := f.Fetch(testCtx(t), Request{URL: u, Attempt: 1, MaxAttempts: 2})
			require.True(t, res.Retry && res.Err != nil, fmt.Sprint("first attempt: ", res.Err))
			assert.True(t, time.Since(start) < phaseBound, fmt.Sprint("no phase timeout ended the fetch: ", time.Since(start)))
			assert.Equal(t, c.reason, res.Reason, res.Err)
			assert.Equal(t, c.down, res.HostDown, res.Err)
			assert.True(t, strings.Contains(res.Err.Error(), c.errText), res.Err)

			res = f.Fetch(testCtx(t), Request{URL: u, Attempt: 2, MaxAttempts: 2})
			require.True(t, !res.Retry && res.Page != nil && res.Page.Err != "", fmt.Sprint("last attempt: ", res.Err))
			assert.Equal(t, c.reason, res.Reason, res.Err)
			assert.Equal(t, c.down, res.HostDown, res.Err)
		})
	}
}

func statusServer(t *testing.T, code int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// TestFetchPermanentReasons: what is never retried has its reason too, and
// a page that is no failure has none.
func TestFetchPermanentReasons(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/gone":
			http.Error(w, "gone", http.StatusGone)
		case "/missing":
			http.NotFound(w, r)
		case "/moved":
			http.Redirect(w, r, "/next", http.StatusFound)
		case "/bad-target":
			rawRedirect(w, "mailto:x@example.com")
		default:
			io.WriteString(w, "<a href=/x>x</a>")
		}
	}))
	t.Cleanup(srv.Close)
	f := newTestFetcher(t, testConfig(srv.URL))
	f.cfg.MaxRedirects = new(1)
	cases := []struct {
		name   string
		req    Request
		reason string
	}{
		{"ok", Request{URL: srv.URL + "/"}, ""},
		{"redirect", Request{URL: srv.URL + "/moved"}, ""},
		{"404", Request{URL: srv.URL + "/missing"}, page.Reason4xx},
		{"410", Request{URL: srv.URL + "/gone"}, page.Reason4xx},
		{"redirect hop limit", Request{URL: srv.URL + "/moved", Hops: 1}, page.ReasonRedirect},
		{"redirect to an invalid url", Request{URL: srv.URL + "/bad-target"}, page.ReasonRedirect},
		{"robots", Request{URL: srv.URL + "/", Robots: urlrule.ParseRobots(200, []byte("User-agent: *\nDisallow: /\n"), nil)}, page.ReasonRobots},
		{"invalid url", Request{URL: "http://a b/"}, page.ReasonInvalid},
		{"url too long", Request{URL: srv.URL + "/" + strings.Repeat("a", urlrule.MaxURLLength)}, page.ReasonTrap},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := f.Fetch(testCtx(t), c.req)
			require.True(t, res.Page != nil && !res.Retry, res.Err)
			assert.Equal(t, c.reason, res.Reason, fmt.Sprint(res.Err, res.Page.Err))
			assert.True(t, !res.HostDown)
		})
	}
	guardCfg := testConfig(srv.URL)
	guardCfg.AllowAddrs = nil
	guarded := newTestFetcher(t, guardCfg)
	res := guarded.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	assert.Equal(t, page.ReasonGuard, res.Reason, res.Err)
	assert.True(t, !res.HostDown && !res.Retry)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res = f.Fetch(ctx, Request{URL: srv.URL + "/"})
	assert.True(t, res.Retry && res.Reason == "" && !res.HostDown, fmt.Sprint("a cancelled fetch learns nothing: ", res.Reason))
}

func TestFetchRobotsReasons(t *testing.T) {
	statusSrv := func(code int) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			io.WriteString(w, "User-agent: *\nDisallow: /x\n")
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	cases := []struct {
		name   string
		root   string
		reason string
		down   bool
	}{
		{"200", statusSrv(200), "", false},
		{"404 means no robots.txt", statusSrv(404), "", false},
		{"503", statusSrv(503), page.Reason5xx, false},
		{"429", statusSrv(429), page.Reason4xx, false},
		{"unresolvable", "http://dead.invalid", page.ReasonDNS, true},
		{"refused", "http://" + refusedAddr(t), page.ReasonRefused, true},
		{"silent", "http://" + silentAddr(t), page.ReasonTimeout, true},
		{"tls garbage", "https://" + connAddr(t, func(c *net.TCPConn) { io.WriteString(c, "garbage\r\n") }), page.ReasonTLS, true},
		{"invalid root", "ftp://x", page.ReasonInvalid, false},
	}
	cfg := testConfig("http://127.0.0.1")
	cfg.AllowPrivate = true
	f, err := New(cfg, WithTimeouts(shortTimeouts()))
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rr := f.FetchRobots(testCtx(t), c.root)
			assert.Equal(t, c.reason, rr.Reason, rr.Err)
			assert.Equal(t, c.down, rr.HostDown, rr.Err)
			// A reason is given exactly when robots.txt is unreachable.
			assert.Equal(t, urlrule.ParseRobots(rr.Status, rr.Body, rr.Err).Unreachable, rr.Reason != "", rr.Err)
		})
	}
}

// TestDeadWebReasons fetches testweb's dead-hosts web: every live page is a
// page with no failure, every URL of a dead host fails with the reason the
// web expects (its words are fetch's), and the robots.txt-503 host's
// robots.txt is unreachable.
func TestDeadWebReasons(t *testing.T) {
	web, err := testweb.StartDead(testweb.DeadConfig{Base: 64, LiveHosts: 2, PagesPerHost: 4})
	require.True(t, err == nil, err)
	t.Cleanup(func() { web.Close() })
	cfg := campaign.Config{ID: "dead", Seeds: web.Seeds(), Scope: web.Scope(), AllowPrivate: true}.WithDefaults()
	f, err := New(cfg, WithTimeouts(shortTimeouts()))
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)

	for _, u := range web.Live() {
		res := f.Fetch(testCtx(t), Request{URL: u, Attempt: 1, MaxAttempts: 3})
		require.True(t, res.Page != nil && res.Page.Status == 200, fmt.Sprint(u, res.Err))
		assert.Equal(t, "", res.Reason, u)
	}
	for _, h := range web.DeadHosts() {
		if h.Kind == testweb.DeadRobots {
			rr := f.FetchRobots(testCtx(t), h.Root)
			assert.True(t, urlrule.ParseRobots(rr.Status, rr.Body, rr.Err).Unreachable, "robots.txt 503 is unreachable")
			assert.Equal(t, page.Reason5xx, rr.Reason)
			assert.True(t, !rr.HostDown)
			assert.Equal(t, page.ReasonRobots, h.Reason)
			continue
		}
		for _, u := range h.URLs {
			res := f.Fetch(testCtx(t), Request{URL: u, Attempt: 1, MaxAttempts: 3})
			assert.True(t, res.Retry, u)
			assert.Equal(t, h.Reason, res.Reason, fmt.Sprint(u, res.Err))
			assert.True(t, res.HostDown, fmt.Sprint(u, " does not count against its host"))
		}
	}
}

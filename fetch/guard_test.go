package fetch

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestGuardClasses(t *testing.T) {
	g, err := newAddrGuard(false, []string{"127.0.0.1", "::ffff:10.1.2.3"})
	require.True(t, err == nil, err)
	cases := []struct {
		ip    string
		class string // "" when allowed
	}{
		{"8.8.8.8", ""},
		{"2001:4860:4860::8888", ""},
		{"127.0.0.1", ""}, // allowed exactly
		{"10.1.2.3", ""},  // allowed, written mapped
		{"127.0.0.2", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.5", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.5.4", "private"},
		{"172.32.0.1", ""},
		{"192.168.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"169.254.169.254", "metadata"},
		{"fd00:ec2::254", "metadata"},
		{"169.254.1.1", "link-local"},
		{"fe80::1", "link-local"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"224.0.0.1", "multicast"},
		{"ff02::1", "multicast"},
		{"100.64.0.1", "cgnat"},
		{"100.128.0.1", ""},
		{"255.255.255.255", "reserved"},
	}
	for _, c := range cases {
		err := g.check(netip.MustParseAddr(c.ip))
		if c.class == "" {
			assert.True(t, err == nil, fmt.Sprint(c.ip, ": ", err))
			continue
		}
		var ge *GuardError
		if assert.True(t, errors.As(err, &ge), fmt.Sprint(c.ip, " allowed")); ge != nil {
			assert.Equal(t, c.class, ge.Class, c.ip)
			assert.True(t, strings.HasPrefix(ge.Error(), "address guard: "+ge.IP.String()+" is private"), ge.Error())
		}
	}
	open, _ := newAddrGuard(true, nil)
	assert.True(t, open.check(netip.MustParseAddr("10.0.0.1")) == nil, "AllowPrivate turns the guard off")
	_, err = newAddrGuard(false, []string{"not-an-ip"})
	assert.True(t, err != nil)
}

// countingListener accepts and counts connections on addr.
func countingListener(t *testing.T, addr string) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	require.True(t, err == nil, err)
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	serve(ln, func(c net.Conn) {
		n.Add(1)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		c.Read(make([]byte, 4096))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
	})
	return ln, &n
}

// TestAddressGuard: with the guard on and only the test server's own IP
// allowed, a page's links to other loopback addresses, private space and
// the cloud metadata address are refused without a connection attempt.
func TestAddressGuard(t *testing.T) {
	trap, conns := countingListener(t, "127.0.0.2:0")
	port := trap.Addr().(*net.TCPAddr).Port
	targets := []string{
		"http://127.0.0.2:" + itoa(port) + "/",
		"http://127.9.9.9:" + itoa(port) + "/",
		"http://[::1]:" + itoa(port) + "/",
		"http://0.0.0.0:" + itoa(port) + "/",
		"http://10.0.0.1/",
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/latest/meta-data/",
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		for _, u := range targets {
			io.WriteString(w, `<a href="`+u+`">x</a>`)
		}
	}))
	defer srv.Close()
	cfg := testConfig(srv.URL)
	cfg.Scope = []string{"."}
	f := newTestFetcher(t, cfg)
	ctx := testCtx(t)

	res := f.Fetch(ctx, Request{URL: srv.URL + "/"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	assert.Equal(t, len(targets), len(res.Links), linkURLs(res.Links))
	for _, l := range res.Links {
		r := f.Fetch(ctx, Request{URL: l.URL, Attempt: 1, MaxAttempts: 3})
		require.True(t, r.Page != nil, l.URL)
		assert.True(t, !r.Retry, fmt.Sprint(l.URL, ": a guard refusal is permanent"))
		assert.Equal(t, 0, r.Page.Status)
		assert.True(t, strings.HasPrefix(r.Page.Err, "address guard: "), fmt.Sprint(l.URL, ": ", r.Page.Err))
		var ge *GuardError
		assert.True(t, errors.As(r.Err, &ge), r.Err)
	}
	rr := f.FetchRobots(ctx, "http://127.0.0.2:"+itoa(port))
	assert.True(t, rr.Err != nil && strings.Contains(rr.Err.Error(), "address guard"), rr.Err)
	assert.Equal(t, int32(0), conns.Load(), "the guarded listener saw a connection")

	// The same fetch with the guard off reaches the listener: the zero
	// above is not an artefact of the test.
	cfg.AllowPrivate = true
	open := newTestFetcher(t, cfg)
	r := open.Fetch(ctx, Request{URL: targets[0]})
	require.True(t, r.Page != nil && r.Page.Status == 200, fmt.Sprint(r.Err, r.Page))
	assert.Equal(t, "127.0.0.2", r.Page.IP)
	assert.Equal(t, int32(1), conns.Load())
}

// TestGuardHostName: a name that resolves to a refused address is refused
// the same way ("localhost" resolves to loopback only).
func TestGuardHostName(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	cfg := testConfig(srv.URL)
	cfg.AllowAddrs = nil
	f := newTestFetcher(t, cfg)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	r := f.Fetch(testCtx(t), Request{URL: "http://localhost:" + itoa(port) + "/", Attempt: 1, MaxAttempts: 3})
	require.True(t, r.Page != nil && !r.Retry, r.Err)
	assert.True(t, strings.HasPrefix(r.Page.Err, "address guard: "), r.Page.Err)
}

func itoa(n int) string { return strconv.Itoa(n) }

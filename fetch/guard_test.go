package fetch

import (
	"errors"
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
)

func TestGuardClasses(t *testing.T) {
	g, err := newAddrGuard(false, []string{"127.0.0.1", "::ffff:10.1.2.3"})
	must(t, err == nil, err)
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
			check(t, err == nil, c.ip, ": ", err)
			continue
		}
		var ge *GuardError
		if check(t, errors.As(err, &ge), c.ip, " allowed"); ge != nil {
			equal(t, ge.Class, c.class, c.ip)
			check(t, strings.HasPrefix(ge.Error(), "address guard: "+ge.IP.String()+" is private"), ge.Error())
		}
	}
	open, _ := newAddrGuard(true, nil)
	check(t, open.check(netip.MustParseAddr("10.0.0.1")) == nil, "AllowPrivate turns the guard off")
	_, err = newAddrGuard(false, []string{"not-an-ip"})
	check(t, err != nil)
}

// countingListener accepts and counts connections on addr.
func countingListener(t *testing.T, addr string) (net.Listener, *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	must(t, err == nil, err)
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
	must(t, res.Page != nil && res.Page.Status == 200, res.Err)
	equal(t, len(res.Links), len(targets), linkURLs(res.Links))
	for _, l := range res.Links {
		r := f.Fetch(ctx, Request{URL: l.URL, Attempt: 1, MaxAttempts: 3})
		must(t, r.Page != nil, l.URL)
		check(t, !r.Retry, l.URL, ": a guard refusal is permanent")
		equal(t, r.Page.Status, 0)
		check(t, strings.HasPrefix(r.Page.Err, "address guard: "), l.URL, ": ", r.Page.Err)
		var ge *GuardError
		check(t, errors.As(r.Err, &ge), r.Err)
	}
	rr := f.FetchRobots(ctx, "http://127.0.0.2:"+itoa(port))
	check(t, rr.Err != nil && strings.Contains(rr.Err.Error(), "address guard"), rr.Err)
	equal(t, conns.Load(), int32(0), "the guarded listener saw a connection")

	// The same fetch with the guard off reaches the listener: the zero
	// above is not an artefact of the test.
	cfg.AllowPrivate = true
	open := newTestFetcher(t, cfg)
	r := open.Fetch(ctx, Request{URL: targets[0]})
	must(t, r.Page != nil && r.Page.Status == 200, r.Err, r.Page)
	equal(t, r.Page.IP, "127.0.0.2")
	equal(t, conns.Load(), int32(1))
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
	must(t, r.Page != nil && !r.Retry, r.Err)
	check(t, strings.HasPrefix(r.Page.Err, "address guard: "), r.Page.Err)
}

func itoa(n int) string { return strconv.Itoa(n) }

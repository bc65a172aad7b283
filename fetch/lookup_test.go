package fetch

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/page"
)

// hostRecorder is a loopback listener that records the Host header of every
// request it gets.
type hostRecorder struct {
	srv   *httptest.Server
	port  string
	mu    sync.Mutex
	hosts []string
}

func newHostRecorder(t *testing.T) *hostRecorder {
	t.Helper()
	r := &hostRecorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.hosts = append(r.hosts, req.Host)
		r.mu.Unlock()
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html><body>virtual</body></html>"))
	}))
	t.Cleanup(r.srv.Close)
	_, r.port, _ = net.SplitHostPort(r.srv.Listener.Addr().String())
	return r
}

func (r *hostRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.hosts...)
}

// answer is a lookup that maps every name to ips and records what it was
// asked.
func answer(asked *[]string, ips ...string) LookupFunc {
	var mu sync.Mutex
	return func(_ context.Context, host string) ([]netip.Addr, error) {
		mu.Lock()
		*asked = append(*asked, host)
		mu.Unlock()
		out := make([]netip.Addr, len(ips))
		for i, s := range ips {
			out[i] = netip.MustParseAddr(s)
		}
		return out, nil
	}
}

func virtualConfig(rawURL string, allowPrivate bool) campaign.Config {
	return campaign.Config{ID: "virtual", Seeds: []string{rawURL}, AllowPrivate: allowPrivate}.WithDefaults()
}

// A virtual name goes through the lookup hook, lands on the listener it
// maps to, and the request carries the virtual name in its Host header.
func TestLookupVirtualHost(t *testing.T) {
	rec := newHostRecorder(t)
	u := "http://host7.sim:" + rec.port + "/"
	var asked []string
	f, err := New(virtualConfig(u, true), WithLookup(answer(&asked, "127.0.0.1")))
	must(t, err == nil, err)
	t.Cleanup(f.Close)
	res := f.Fetch(testCtx(t), Request{URL: u})
	must(t, res.Err == nil && res.Page != nil, "fetch failed: ", res.Err)
	equal(t, res.Page.Status, 200)
	equal(t, res.Page.IP, "127.0.0.1")
	equal(t, rec.got(), []string{"host7.sim:" + rec.port}, "Host headers at the listener")
	equal(t, asked, []string{"host7.sim"}, "names asked of the hook")
}

// Without the hook, the resolver answers as before: a name it does not know
// fails as DNS, and nothing reaches the listener.
func TestLookupNilUsesResolver(t *testing.T) {
	rec := newHostRecorder(t)
	u := "http://host7.sim:" + rec.port + "/"
	var dialed []string
	var mu sync.Mutex
	r := &net.Resolver{PreferGo: true, Dial: func(_ context.Context, _, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, addr)
		mu.Unlock()
		return nil, &net.DNSError{Err: "no such host", Name: "host7.sim", IsNotFound: true}
	}}
	to := DefaultTimeouts()
	to.DNS = 2 * time.Second
	f, err := New(virtualConfig(u, true), WithResolver(r), WithTimeouts(to))
	must(t, err == nil, err)
	t.Cleanup(f.Close)
	res := f.Fetch(testCtx(t), Request{URL: u})
	must(t, res.Err != nil, "fetch of an unknown name succeeded")
	equal(t, res.Reason, page.ReasonDNS, res.Err)
	mu.Lock()
	check(t, len(dialed) > 0, "the resolver was not asked")
	mu.Unlock()
	equal(t, len(rec.got()), 0, "requests at the listener")
}

// What the hook answers goes through the address guard: with AllowPrivate
// off, a loopback or cloud-metadata answer is refused before any connect,
// and an allowed address among them is the one dialed.
func TestLookupGuarded(t *testing.T) {
	rec := newHostRecorder(t)
	u := "http://host7.sim:" + rec.port + "/"
	for _, c := range []struct {
		ips   []string
		class string
	}{
		{[]string{"127.0.0.1"}, "loopback"},
		{[]string{"169.254.169.254"}, "metadata"},
		{[]string{"10.1.2.3", "127.0.0.1"}, "private"},
	} {
		var asked []string
		f, err := New(virtualConfig(u, false), WithLookup(answer(&asked, c.ips...)))
		must(t, err == nil, err)
		res := f.Fetch(testCtx(t), Request{URL: u})
		f.Close()
		var ge *GuardError
		if check(t, errors.As(res.Err, &ge), c.ips, ": not refused by the guard: ", res.Err); ge != nil {
			equal(t, ge.Class, c.class, c.ips)
		}
		equal(t, res.Reason, page.ReasonGuard, c.ips)
		equal(t, len(asked), 1, c.ips, ": the hook was not asked")
	}
	equal(t, len(rec.got()), 0, "requests at the listener")

	// AllowAddrs lets the listener's address through, and only it.
	var asked []string
	cfg := virtualConfig(u, false)
	cfg.AllowAddrs = []string{"127.0.0.1"}
	f, err := New(cfg, WithLookup(answer(&asked, "10.1.2.3", "127.0.0.1")))
	must(t, err == nil, err)
	t.Cleanup(f.Close)
	res := f.Fetch(testCtx(t), Request{URL: u})
	must(t, res.Err == nil && res.Page != nil, "fetch failed: ", res.Err)
	equal(t, res.Page.IP, "127.0.0.1")
	equal(t, rec.got(), []string{"host7.sim:" + rec.port})
}

// ResolveIP answers the address a fetch of the host would dial first,
// through the hook and the guard, and sends nothing to the host; the
// fetch then reports that address, in the Result too.
func TestResolveIPIsTheAddressDialed(t *testing.T) {
	rec := newHostRecorder(t)
	u := "http://host7.sim:" + rec.port + "/"
	var asked []string
	f, err := New(virtualConfig(u, true), WithLookup(answer(&asked, "127.0.0.1", "127.0.0.2")))
	must(t, err == nil, err)
	t.Cleanup(f.Close)
	ip, err := f.ResolveIP(testCtx(t), "http://host7.sim:"+rec.port)
	must(t, err == nil, err)
	equal(t, ip, "127.0.0.1")
	equal(t, len(rec.got()), 0, "requests at the listener after a resolve")
	res := f.Fetch(testCtx(t), Request{URL: u})
	must(t, res.Err == nil && res.Page != nil, "fetch failed: ", res.Err)
	equal(t, res.IP, ip)
	equal(t, res.Page.IP, ip)

	// Refused by the guard: no address, and the guard's error.
	g, err := New(virtualConfig(u, false), WithLookup(answer(&asked, "127.0.0.1")))
	must(t, err == nil, err)
	t.Cleanup(g.Close)
	ip, err = g.ResolveIP(testCtx(t), "http://host7.sim:"+rec.port)
	var ge *GuardError
	check(t, errors.As(err, &ge) && ip == "", "a guarded address resolved: ", ip, err)
}

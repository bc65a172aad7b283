package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)
	res := f.Fetch(testCtx(t), Request{URL: u})
	require.True(t, res.Err == nil && res.Page != nil, fmt.Sprint("fetch failed: ", res.Err))
	assert.Equal(t, 200, res.Page.Status)
	assert.Equal(t, "127.0.0.1", res.Page.IP)
	assert.Equal(t, []string{"host7.sim:" + rec.port}, rec.got(), "Host headers at the listener")
	assert.Equal(t, []string{"host7.sim"}, asked, "names asked of the hook")
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
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)
	res := f.Fetch(testCtx(t), Request{URL: u})
	require.True(t, res.Err != nil, "fetch of an unknown name succeeded")
	assert.Equal(t, page.ReasonDNS, res.Reason, res.Err)
	mu.Lock()
	assert.True(t, len(dialed) > 0, "the resolver was not asked")
	mu.Unlock()
	assert.Equal(t, 0, len(rec.got()), "requests at the listener")
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
		require.True(t, err == nil, err)
		res := f.Fetch(testCtx(t), Request{URL: u})
		f.Close()
		var ge *GuardError
		if assert.True(t, errors.As(res.Err, &ge), fmt.Sprint(c.ips, ": not refused by the guard: ", res.Err)); ge != nil {
			assert.Equal(t, c.class, ge.Class, c.ips)
		}
		assert.Equal(t, page.ReasonGuard, res.Reason, c.ips)
		assert.Equal(t, 1, len(asked), fmt.Sprint(c.ips, ": the hook was not asked"))
	}
	assert.Equal(t, 0, len(rec.got()), "requests at the listener")

	// AllowAddrs lets the listener's address through, and only it.
	var asked []string
	cfg := virtualConfig(u, false)
	cfg.AllowAddrs = []string{"127.0.0.1"}
	f, err := New(cfg, WithLookup(answer(&asked, "10.1.2.3", "127.0.0.1")))
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)
	res := f.Fetch(testCtx(t), Request{URL: u})
	require.True(t, res.Err == nil && res.Page != nil, fmt.Sprint("fetch failed: ", res.Err))
	assert.Equal(t, "127.0.0.1", res.Page.IP)
	assert.Equal(t, []string{"host7.sim:" + rec.port}, rec.got())
}

// ResolveIP answers the address a fetch of the host would dial first,
// through the hook and the guard, and sends nothing to the host; the
// fetch then reports that address, in the Result too.
func TestResolveIPIsTheAddressDialed(t *testing.T) {
	rec := newHostRecorder(t)
	u := "http://host7.sim:" + rec.port + "/"
	var asked []string
	f, err := New(virtualConfig(u, true), WithLookup(answer(&asked, "127.0.0.1", "127.0.0.2")))
	require.NoError(t, err)
	t.Cleanup(f.Close)
	ip, err := f.ResolveIP(testCtx(t), "http://host7.sim:"+rec.port)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", ip)
	assert.Empty(t, rec.got(), "requests at the listener after a resolve")
	res := f.Fetch(testCtx(t), Request{URL: u})
	require.True(t, res.Err == nil && res.Page != nil, fmt.Sprint("fetch failed: ", res.Err))
	assert.Equal(t, ip, res.IP)
	assert.Equal(t, ip, res.Page.IP)

	// Refused by the guard: no address, and the guard's error.
	g, err := New(virtualConfig(u, false), WithLookup(answer(&asked, "127.0.0.1")))
	require.NoError(t, err)
	t.Cleanup(g.Close)
	ip, err = g.ResolveIP(testCtx(t), "http://host7.sim:"+rec.port)
	var ge *GuardError
	assert.True(t, errors.As(err, &ge), "a guarded address resolved: %q %v", ip, err)
	assert.Empty(t, ip)
}

package testweb

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A client that dials through Lookup reaches each virtual host by name, on
// the one listener; the counts see every page, robots.txt and stray request.
func TestVirtualHosts(t *testing.T) {
	v, err := StartVirtual(VirtualConfig{Hosts: 3, PagesPerHost: 2})
	require.NoError(t, err)
	t.Cleanup(func() { _ = v.Close() })
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		name, port, _ := net.SplitHostPort(addr)
		ips, err := v.Lookup(ctx, name)
		if err != nil {
			return nil, err
		}
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort(ips[0].String(), port))
	}}}
	get := func(u string) (int, string) {
		t.Helper()
		resp, err := client.Get(u)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for h := range 3 {
		code, body := get(v.URL(h, 0))
		assert.Falsef(t, code != 200 || !strings.Contains(body, "<title>host "+string(rune('0'+h))+" page 0</title>") || !strings.Contains(body, `href="/p/1.html"`),
			"host %d root: %d %q", h, code, body)
	}
	code, body := get(v.URL(1, 1))
	assert.Falsef(t, code != 200 || !strings.Contains(body, "host 1 page 1"), "host 1 page 1: %d %q", code, body)
	_, _ = get(v.URL(1, 1))
	code, body = get("http://" + v.Host(2) + "/robots.txt")
	assert.Falsef(t, code != 200 || body != virtualRobots, "robots.txt: %d %q", code, body)
	for _, u := range []string{"http://" + v.Host(0) + "/p/2.html", "http://" + v.Host(0) + "/p/01.html"} {
		code, _ := get(u)
		assert.Equalf(t, 404, code, "%s: status", u)
	}
	code, body = get("http://host3.sim:" + v.port + "/")
	assert.Falsef(t, code != 0 || !strings.Contains(body, "no such host"), "host3.sim (beyond Hosts): %d %q, want a lookup failure", code, body)
	want := VirtualCounts{Requests: 8, Missing: 2, Duplicates: 1, Robots: 1, Other: 2}
	assert.Equal(t, want, v.Counts(), "counts")
}

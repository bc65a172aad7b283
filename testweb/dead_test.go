package testweb

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func startDead(t *testing.T, cfg DeadConfig) *DeadWeb {
	t.Helper()
	return started(t, "StartDead", func() (*DeadWeb, error) { return StartDead(cfg) })
}

// TestDeadWebShape crawls the live hosts over their links and checks that
// it finds exactly Live(), that the links leaving them are exactly the dead
// URLs and the disallowed pages, and that every URL is in Scope.
func TestDeadWebShape(t *testing.T) {
	d := startDead(t, DeadConfig{Base: 61})
	c := newClient()
	live := map[string]bool{}
	for _, h := range d.Web().Hosts() {
		live[h] = true
	}
	var scope []*regexp.Regexp
	for _, s := range d.Scope() {
		scope = append(scope, regexp.MustCompile(s))
	}
	inScope := func(u string) bool {
		return slices.ContainsFunc(scope, func(re *regexp.Regexp) bool { return re.MatchString(u) })
	}

	seen := map[string]bool{}
	queue := d.Seeds()
	for _, s := range queue {
		seen[s] = true
	}
	linkedDead := map[string]int{}
	var private []string
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := get(t, c, s)
		require.Equalf(t, http.StatusOK, f.status, "status of live page %s", s)
		base, _ := url.Parse(s)
		deadOnPage := 0
		for _, ref := range hrefs(f.body) {
			u, err := base.Parse(ref)
			require.NoErrorf(t, err, "link %q on %s", ref, s)
			u.Fragment = ""
			us := u.String()
			assert.Truef(t, inScope(us), "link %s on %s is out of Scope()", us, s)
			switch {
			case !live[u.Host]:
				linkedDead[us]++
				deadOnPage++
			case d.Web().Disallowed(us):
				if !slices.Contains(private, us) {
					private = append(private, us)
				}
			case !seen[us]:
				seen[us] = true
				queue = append(queue, us)
			}
		}
		want := 1
		if base.Path == "/" {
			want = len(d.Dead())
		}
		assert.Equalf(t, want, deadOnPage, "number of dead URLs %s links to", s)
	}
	assert.Equal(t, sorted(d.Live()), sorted(slices.Collect(maps.Keys(seen))), "live URLs the crawl found, against Live()")
	assert.Equal(t, 3*12, len(d.Live()), "len(Live()), want 36 (3 hosts of 12 pages by default)")
	assert.Equal(t, sorted(slices.Collect(maps.Keys(d.Dead()))), sorted(slices.Collect(maps.Keys(linkedDead))), "dead links found, against Dead()")
	assert.Equal(t, sorted(d.Disallowed()), sorted(private), "disallowed links found, against Disallowed()")
	assert.Empty(t, d.Web().Missing(), "Missing() after the crawl")

	reasons := map[DeadKind]string{}
	for _, h := range d.DeadHosts() {
		reasons[h.Kind] = h.Reason
		assert.Equalf(t, len(deadPaths), len(h.URLs), "number of URLs of %s", h.Kind)
		for _, u := range h.URLs {
			assert.Falsef(t, !strings.HasPrefix(u, h.Root+"/") || d.Dead()[u] != h.Reason, "%s: URL %s, reason %q", h.Kind, u, d.Dead()[u])
		}
	}
	want := map[DeadKind]string{DeadDNS: "dns", DeadRefused: "refused", DeadSilent: "timeout", DeadTLS: "tls", DeadRobots: "robots"}
	assert.Equal(t, want, reasons, "reasons")
}

// TestDeadHostsAtTheSocket checks that each dead host fails the way its
// kind says, with a client of the standard library.
func TestDeadHostsAtTheSocket(t *testing.T) {
	d := startDead(t, DeadConfig{Base: 62})
	hostport := func(k DeadKind) string {
		u, err := url.Parse(d.DeadHost(k).Root)
		require.NoError(t, err)
		return u.Host
	}

	t.Run("dns", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, err := net.DefaultResolver.LookupHost(ctx, hostport(DeadDNS))
		var de *net.DNSError
		require.ErrorAsf(t, err, &de, "lookup of %s: %v, want a DNS error", hostport(DeadDNS), err)
	})

	t.Run("refused", func(t *testing.T) {
		for range 3 { // and it stays refused
			_, err := net.DialTimeout("tcp", hostport(DeadRefused), 5*time.Second)
			require.ErrorIsf(t, err, syscall.ECONNREFUSED, "dial: %v, want connection refused", err)
		}
	})

	t.Run("silent", func(t *testing.T) {
		before := d.Conns(DeadSilent)
		c, err := net.DialTimeout("tcp", hostport(DeadSilent), 5*time.Second)
		require.NoError(t, err)
		defer c.Close()
		_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(make([]byte, 1))
		var ne net.Error
		require.Falsef(t, n != 0 || !errors.As(err, &ne) || !ne.Timeout(), "read %d bytes, %v; want nothing until the deadline", n, err)
		await.For(t, 5*time.Second, 10*time.Millisecond, "the connection counted", func() error {
			if n := d.Conns(DeadSilent); n != before+1 {
				return fmt.Errorf("%d connections counted", n)
			}
			return nil
		})
	})

	t.Run("tls", func(t *testing.T) {
		before := d.Conns(DeadTLS)
		dialer := &net.Dialer{Timeout: 5 * time.Second}
		c, err := tls.DialWithDialer(dialer, "tcp", hostport(DeadTLS), &tls.Config{InsecureSkipVerify: true})
		if err == nil {
			c.Close()
			require.FailNow(t, "the TLS handshake succeeded")
		}
		var rh tls.RecordHeaderError
		require.ErrorAsf(t, err, &rh, "handshake: %v, want a record that is not TLS", err)
		await.For(t, 5*time.Second, 10*time.Millisecond, "the connection counted", func() error {
			if n := d.Conns(DeadTLS); n != before+1 {
				return fmt.Errorf("%d connections counted", n)
			}
			return nil
		})
	})

	t.Run("robots503", func(t *testing.T) {
		c := newClient()
		root := d.DeadHost(DeadRobots).Root
		assert.Equal(t, http.StatusServiceUnavailable, get(t, c, root+"/robots.txt").status, "status of robots.txt")
		page := d.DeadHost(DeadRobots).URLs[1]
		assert.Equalf(t, http.StatusOK, get(t, c, page).status, "status of %s (200 so that a fetch that ignored robots.txt shows)", page)
		reqs := d.DeadRequests()
		assert.Falsef(t, len(reqs) != 2 || reqs[0].URL != root+"/robots.txt" || reqs[0].Status != 503 || reqs[1].URL != page || reqs[1].UA != testUA,
			"DeadRequests() = %+v", reqs)
	})
}

// TestDeadWebClose: Close ends the connections a silent host holds and
// stops every host; the refused port is released.
func TestDeadWebClose(t *testing.T) {
	d, err := StartDead(DeadConfig{Base: 63, LiveHosts: 1, PagesPerHost: 2})
	require.NoError(t, err)
	silent := strings.TrimPrefix(d.DeadHost(DeadSilent).Root, "http://")
	refused := strings.TrimPrefix(d.DeadHost(DeadRefused).Root, "http://")
	c, err := net.DialTimeout("tcp", silent, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	await.For(t, 5*time.Second, 10*time.Millisecond, "the connection counted", func() error {
		if n := d.Conns(DeadSilent); n != 1 {
			return fmt.Errorf("%d connections counted", n)
		}
		return nil
	})

	closed := make(chan error, 1)
	go func() { closed <- d.Close() }()
	select {
	case err := <-closed:
		require.NoError(t, err, "Close")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Close did not return while a client held a silent connection")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ne net.Error
	_, err = c.Read(make([]byte, 1))
	assert.Falsef(t, err == nil || (errors.As(err, &ne) && ne.Timeout()), "read after Close: %v, want the connection closed", err)
	for _, addr := range []string{silent, strings.TrimPrefix(d.Seeds()[0], "http://")} {
		if c, err := net.DialTimeout("tcp", strings.TrimSuffix(addr, "/"), 2*time.Second); err == nil {
			c.Close()
			assert.Failf(t, "still accepts after Close", "%s still accepts after Close", addr)
		}
	}
	ln, err := net.Listen("tcp", refused)
	if assert.NoError(t, err, "the refused port is still reserved after Close") {
		ln.Close()
	}
	assert.NoError(t, d.Close(), "second Close")
}

func TestDeadConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  DeadConfig
		want string
	}{
		{DeadConfig{}, ""},
		{DeadConfig{LiveHosts: 255}, ""},
		{DeadConfig{LiveHosts: 256}, "LiveHosts is 256, must be in 1..255"},
		{DeadConfig{LiveHosts: -1}, "LiveHosts is -1"},
		{DeadConfig{PagesPerHost: 1}, "PagesPerHost is 1, must be in 2..10000"},
	} {
		err := c.cfg.Validate()
		assert.Falsef(t, (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)),
			"Validate(%+v) = %v, want %q", c.cfg, err, c.want)
	}
	_, err := StartDead(DeadConfig{PagesPerHost: 1})
	assert.Error(t, err, "StartDead accepted an invalid config")
}

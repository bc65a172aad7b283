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
		if f.status != http.StatusOK {
			t.Fatalf("live page %s answered %d", s, f.status)
		}
		base, _ := url.Parse(s)
		deadOnPage := 0
		for _, ref := range hrefs(f.body) {
			u, err := base.Parse(ref)
			if err != nil {
				t.Fatalf("link %q on %s: %v", ref, s, err)
			}
			u.Fragment = ""
			us := u.String()
			if !inScope(us) {
				t.Errorf("link %s on %s is out of Scope()", us, s)
			}
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
		if deadOnPage != want {
			t.Errorf("%s links to %d dead URLs, want %d", s, deadOnPage, want)
		}
	}
	if got, want := sorted(slices.Collect(maps.Keys(seen))), sorted(d.Live()); !slices.Equal(got, want) {
		t.Errorf("crawl found %d live URLs, Live() has %d", len(got), len(want))
	}
	if n := len(d.Live()); n != 3*12 {
		t.Errorf("len(Live()) = %d, want 36 (3 hosts of 12 pages by default)", n)
	}
	if got, want := sorted(slices.Collect(maps.Keys(linkedDead))), sorted(slices.Collect(maps.Keys(d.Dead()))); !slices.Equal(got, want) {
		t.Errorf("dead links found %v, Dead() has %v", got, want)
	}
	if !slices.Equal(sorted(private), sorted(d.Disallowed())) {
		t.Errorf("disallowed links found %v, Disallowed() = %v", private, d.Disallowed())
	}
	if m := d.Web().Missing(); len(m) != 0 {
		t.Errorf("Missing() after the crawl: %v", m)
	}

	reasons := map[DeadKind]string{}
	for _, h := range d.DeadHosts() {
		reasons[h.Kind] = h.Reason
		if len(h.URLs) != len(deadPaths) {
			t.Errorf("%s has %d URLs", h.Kind, len(h.URLs))
		}
		for _, u := range h.URLs {
			if !strings.HasPrefix(u, h.Root+"/") || d.Dead()[u] != h.Reason {
				t.Errorf("%s: URL %s, reason %q", h.Kind, u, d.Dead()[u])
			}
		}
	}
	want := map[DeadKind]string{DeadDNS: "dns", DeadRefused: "refused", DeadSilent: "timeout", DeadTLS: "tls", DeadRobots: "robots"}
	if !maps.Equal(reasons, want) {
		t.Errorf("reasons %v, want %v", reasons, want)
	}
}

// TestDeadHostsAtTheSocket checks that each dead host fails the way its
// kind says, with a client of the standard library.
func TestDeadHostsAtTheSocket(t *testing.T) {
	d := startDead(t, DeadConfig{Base: 62})
	hostport := func(k DeadKind) string {
		u, err := url.Parse(d.DeadHost(k).Root)
		if err != nil {
			t.Fatal(err)
		}
		return u.Host
	}

	t.Run("dns", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_, err := net.DefaultResolver.LookupHost(ctx, hostport(DeadDNS))
		var de *net.DNSError
		if !errors.As(err, &de) {
			t.Fatalf("lookup of %s: %v, want a DNS error", hostport(DeadDNS), err)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for range 3 { // and it stays refused
			_, err := net.DialTimeout("tcp", hostport(DeadRefused), 5*time.Second)
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("dial: %v, want connection refused", err)
			}
		}
	})

	t.Run("silent", func(t *testing.T) {
		before := d.Conns(DeadSilent)
		c, err := net.DialTimeout("tcp", hostport(DeadSilent), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(make([]byte, 1))
		var ne net.Error
		if n != 0 || !errors.As(err, &ne) || !ne.Timeout() {
			t.Fatalf("read %d bytes, %v; want nothing until the deadline", n, err)
		}
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
			t.Fatal("the TLS handshake succeeded")
		}
		var rh tls.RecordHeaderError
		if !errors.As(err, &rh) {
			t.Fatalf("handshake: %v, want a record that is not TLS", err)
		}
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
		if f := get(t, c, root+"/robots.txt"); f.status != http.StatusServiceUnavailable {
			t.Errorf("robots.txt answered %d, want 503", f.status)
		}
		page := d.DeadHost(DeadRobots).URLs[1]
		if f := get(t, c, page); f.status != http.StatusOK {
			t.Errorf("%s answered %d, want 200 (so that a fetch that ignored robots.txt shows)", page, f.status)
		}
		reqs := d.DeadRequests()
		if len(reqs) != 2 || reqs[0].URL != root+"/robots.txt" || reqs[0].Status != 503 || reqs[1].URL != page || reqs[1].UA != testUA {
			t.Errorf("DeadRequests() = %+v", reqs)
		}
	})
}

// TestDeadWebClose: Close ends the connections a silent host holds and
// stops every host; the refused port is released.
func TestDeadWebClose(t *testing.T) {
	d, err := StartDead(DeadConfig{Base: 63, LiveHosts: 1, PagesPerHost: 2})
	if err != nil {
		t.Fatal(err)
	}
	silent := strings.TrimPrefix(d.DeadHost(DeadSilent).Root, "http://")
	refused := strings.TrimPrefix(d.DeadHost(DeadRefused).Root, "http://")
	c, err := net.DialTimeout("tcp", silent, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
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
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a client held a silent connection")
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var ne net.Error
	if _, err := c.Read(make([]byte, 1)); err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("read after Close: %v, want the connection closed", err)
	}
	for _, addr := range []string{silent, strings.TrimPrefix(d.Seeds()[0], "http://")} {
		if c, err := net.DialTimeout("tcp", strings.TrimSuffix(addr, "/"), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts after Close", addr)
		}
	}
	ln, err := net.Listen("tcp", refused)
	if err != nil {
		t.Errorf("the refused port is still reserved after Close: %v", err)
	} else {
		ln.Close()
	}
	if err := d.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
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
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	if _, err := StartDead(DeadConfig{PagesPerHost: 1}); err == nil {
		t.Error("StartDead accepted an invalid config")
	}
}

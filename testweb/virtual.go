package testweb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// VirtualConfig describes a web of many virtual hosts behind one listener:
// hostN.sim (N in 0..Hosts-1), told apart by the Host header, each with
// PagesPerHost small pages and a robots.txt. A client reaches them through
// Lookup, which answers every hostN.sim name with the listener's IP (a
// fetcher's lookup hook: fetch.WithLookup). It stands for a web's worth of
// hosts where binding an IP per host (Start) does not scale.
type VirtualConfig struct {
	// Hosts is the number of virtual hosts, 1..MaxVirtualHosts.
	Hosts int
	// PagesPerHost: / and /p/1.html .. /p/<PagesPerHost-1>.html, 1..1000.
	PagesPerHost int
	// IP is the listener's loopback IP; "" means 127.0.0.1.
	IP string
}

// MaxVirtualHosts bounds VirtualConfig.Hosts.
const MaxVirtualHosts = 10_000_000

// Virtual is a running virtual-host web. Its methods are safe for
// concurrent use.
type Virtual struct {
	cfg  VirtualConfig
	ip   netip.Addr
	port string
	srv  *http.Server
	done chan struct{}
	// hits counts requests by host and page; page index PagesPerHost is
	// robots.txt. other counts every other request.
	hits  []atomic.Uint32
	other atomic.Int64
}

// StartVirtual binds one listener and serves cfg's hosts until Close.
func StartVirtual(cfg VirtualConfig) (*Virtual, error) {
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(cfg.IP)
	switch {
	case err != nil:
		return nil, fmt.Errorf("testweb: IP %q: %w", cfg.IP, err)
	case cfg.Hosts < 1 || cfg.Hosts > MaxVirtualHosts:
		return nil, fmt.Errorf("testweb: Hosts is %d, must be in 1..%d", cfg.Hosts, MaxVirtualHosts)
	case cfg.PagesPerHost < 1 || cfg.PagesPerHost > 1000:
		return nil, fmt.Errorf("testweb: PagesPerHost is %d, must be in 1..1000", cfg.PagesPerHost)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.IP, "0"))
	if err != nil {
		return nil, fmt.Errorf("testweb: listen on %s: %w", cfg.IP, err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	v := &Virtual{cfg: cfg, ip: ip, port: port, done: make(chan struct{}),
		hits: make([]atomic.Uint32, cfg.Hosts*(cfg.PagesPerHost+1))}
	v.srv = &http.Server{Handler: http.HandlerFunc(v.serve), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		defer close(v.done)
		_ = v.srv.Serve(ln) // http.ErrServerClosed after Close
	}()
	return v, nil
}

// Close stops the server and closes its connections.
func (v *Virtual) Close() error {
	err := v.srv.Close()
	<-v.done
	return err
}

// Addr is the listener's "IP:PORT".
func (v *Virtual) Addr() string { return net.JoinHostPort(v.ip.String(), v.port) }

// Host is host h's "hostN.sim:PORT", as in its URLs and Host headers.
func (v *Virtual) Host(h int) string { return "host" + strconv.Itoa(h) + ".sim:" + v.port }

// URL is page p of host h (p 0 is the root).
func (v *Virtual) URL(h, p int) string {
	if p == 0 {
		return "http://" + v.Host(h) + "/"
	}
	return "http://" + v.Host(h) + "/p/" + strconv.Itoa(p) + ".html"
}

// Scope is a campaign scope that takes in every virtual host.
func (v *Virtual) Scope() []string { return []string{`^http://host[0-9]+\.sim:` + v.port + `/`} }

// Lookup answers a hostN.sim name of this web with the listener's IP, and
// any other name as not found (a *net.DNSError), as a resolver would.
func (v *Virtual) Lookup(_ context.Context, host string) ([]netip.Addr, error) {
	if _, ok := v.hostIndex(host); !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []netip.Addr{v.ip}, nil
}

// hostIndex parses "hostN.sim" (N canonical decimal, below Hosts).
func (v *Virtual) hostIndex(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "host")
	if !ok {
		return 0, false
	}
	if s, ok = strings.CutSuffix(s, ".sim"); !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n >= v.cfg.Hosts || strconv.Itoa(n) != s {
		return 0, false
	}
	return n, true
}

var errVirtualRoute = errors.New("not a page of the virtual web")

// route maps a request to its host and page index (PagesPerHost for
// robots.txt).
func (v *Virtual) route(r *http.Request) (h, p int, err error) {
	name, port, err := net.SplitHostPort(r.Host)
	if err != nil || port != v.port {
		return 0, 0, errVirtualRoute
	}
	h, ok := v.hostIndex(name)
	if !ok {
		return 0, 0, errVirtualRoute
	}
	switch path := r.URL.Path; {
	case path == "/robots.txt":
		return h, v.cfg.PagesPerHost, nil
	case path == "/":
		return h, 0, nil
	case strings.HasPrefix(path, "/p/") && strings.HasSuffix(path, ".html"):
		if n, ok := pageNumber(path[len("/p/") : len(path)-len(".html")]); ok && n < v.cfg.PagesPerHost {
			return h, n, nil
		}
	}
	return 0, 0, errVirtualRoute
}

const virtualRobots = "User-agent: *\nDisallow: /private/\n"

func (v *Virtual) serve(w http.ResponseWriter, r *http.Request) {
	h, p, err := v.route(r)
	if err != nil {
		v.other.Add(1)
		http.NotFound(w, r)
		return
	}
	v.hits[h*(v.cfg.PagesPerHost+1)+p].Add(1)
	if p == v.cfg.PagesPerHost {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte(virtualRobots))
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>host %d page %d</title></head><body>\n", h, p)
	for i := range v.cfg.PagesPerHost {
		if i == 0 {
			b.WriteString("<a href=\"/\">home</a>\n")
			continue
		}
		fmt.Fprintf(&b, "<a href=\"/p/%d.html\">page %d</a>\n", i, i)
	}
	b.WriteString("</body></html>\n")
	w.Header().Set("Content-Type", contentHTML)
	_, _ = w.Write([]byte(b.String()))
}

// VirtualCounts says how the requests a crawl made differ from one fetch of
// every page and one of every host's robots.txt.
type VirtualCounts struct {
	Requests   int64 // every request, known or not
	Missing    int64 // pages never fetched
	Duplicates int64 // page fetches beyond the first
	Robots     int64 // robots.txt fetches
	Other      int64 // requests for anything that is not a page or robots.txt
}

// Counts counts the requests so far.
func (v *Virtual) Counts() VirtualCounts {
	c := VirtualCounts{Other: v.other.Load()}
	c.Requests = c.Other
	per := v.cfg.PagesPerHost + 1
	for i := range v.hits {
		n := int64(v.hits[i].Load())
		c.Requests += n
		if i%per == v.cfg.PagesPerHost {
			c.Robots += n
			continue
		}
		if n == 0 {
			c.Missing++
		} else {
			c.Duplicates += n - 1
		}
	}
	return c
}

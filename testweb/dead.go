package testweb

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"
	"time"
)

// DeadKind is a way a host fails.
type DeadKind string

// The dead hosts of a DeadWeb, one of each kind.
const (
	// DeadDNS is a name that never resolves: the .invalid TLD is reserved
	// for that (RFC 6761).
	DeadDNS DeadKind = "dns"
	// DeadRefused is a port that refuses connections: a socket holds it
	// bound without listening, so no one else can take it meanwhile.
	DeadRefused DeadKind = "refused"
	// DeadSilent accepts connections and never answers.
	DeadSilent DeadKind = "silent"
	// DeadTLS is an https URL to a listener that answers garbage, so the
	// TLS handshake fails.
	DeadTLS DeadKind = "tls"
	// DeadRobots serves pages, but its robots.txt answers 503: a polite
	// crawler fetches none of them (RFC 9309: disallow all while robots.txt
	// is unreachable) and, after a bounded number of tries, fails them.
	DeadRobots DeadKind = "robots503"
)

// deadKinds in the order of DeadHosts; deadReasons are the failure reasons
// (page.Reason*) a crawl must report for their URLs. These were literals
// when the words lived in fetch, whose tests import testweb; page would do
// now.
var (
	deadKinds   = []DeadKind{DeadDNS, DeadRefused, DeadSilent, DeadTLS, DeadRobots}
	deadReasons = map[DeadKind]string{
		DeadDNS:     "dns",
		DeadRefused: "refused",
		DeadSilent:  "timeout",
		DeadTLS:     "tls",
		DeadRobots:  "robots",
	}
)

// deadName is the host name of DeadDNS.
const deadName = "dead.invalid"

// deadPaths are the paths of every dead host that the live pages link to.
var deadPaths = []string{"/", "/d/1.html", "/d/2.html"}

// DeadHost is a host of a DeadWeb that no crawl can fetch a page from.
type DeadHost struct {
	Kind DeadKind
	// Root is scheme://host[:port], without a path.
	Root string
	// URLs are its URLs that the live pages link to.
	URLs []string
	// Reason is the failure reason (page.Reason*) a crawl must report for
	// each of URLs: "dns", "refused", "timeout", "tls" and, for the host
	// whose robots.txt answers 503, "robots".
	Reason string
}

// DeadConfig describes a DeadWeb. A zero field takes its default.
type DeadConfig struct {
	// LiveHosts is the number of live hosts (default 3, at most 255).
	LiveHosts int
	// PagesPerHost is the number of pages of each live host (default 12).
	PagesPerHost int
	// Base is the second octet of every address (default 60), so that two
	// DeadWebs, or a DeadWeb and a Web, can coexist.
	Base byte
}

func (c DeadConfig) withDefaults() DeadConfig {
	c.LiveHosts = cmp.Or(c.LiveHosts, 3)
	c.PagesPerHost = cmp.Or(c.PagesPerHost, 12)
	c.Base = cmp.Or(c.Base, 60)
	return c
}

// Validate reports the first field out of its range, after defaults.
func (c DeadConfig) Validate() error {
	c = c.withDefaults()
	switch {
	case c.LiveHosts < 1 || c.LiveHosts > 255:
		// Live hosts are 127.B.0.x; the dead ones are 127.B.1.x.
		return fmt.Errorf("testweb: LiveHosts is %d, must be in 1..255", c.LiveHosts)
	case c.PagesPerHost < 2 || c.PagesPerHost > 10_000:
		return fmt.Errorf("testweb: PagesPerHost is %d, must be in 2..10000", c.PagesPerHost)
	}
	return nil
}

// DeadWeb is a small live web whose pages link to a host of every kind
// that fails (DeadKind). A crawl of it must fetch every live page, report
// every dead URL as failed with its host's reason, and end by itself.
//
// The live hosts are a Web (NoExtras, cross-host links) on 127.B.0.1...;
// every live root links to every dead URL, and every other live page to one
// of them. The dead hosts are dead.invalid and 127.B.1.1 (refused),
// 127.B.1.2 (silent), 127.B.1.3 (TLS garbage), 127.B.1.4 (robots.txt 503),
// each on a port of its own. Its methods are safe for concurrent use.
type DeadWeb struct {
	cfg   DeadConfig
	live  *Web
	hosts []DeadHost

	refused   io.Closer
	silent    net.Listener
	tlsLn     net.Listener
	robotsLn  net.Listener
	robotsSrv *http.Server
	serving   sync.WaitGroup

	mu     sync.Mutex
	closed bool
	open   map[net.Conn]bool
	conns  map[DeadKind]int
	reqs   []Request

	closeOnce sync.Once
	closeErr  error
}

// StartDead starts the dead hosts, then the live web whose pages link to
// them. It fails when cfg is invalid or an address cannot be bound.
func StartDead(cfg DeadConfig) (*DeadWeb, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &DeadWeb{cfg: cfg, open: map[net.Conn]bool{}, conns: map[DeadKind]int{}}
	ip := func(n int) string { return fmt.Sprintf("127.%d.1.%d", cfg.Base, n) }
	fail := func(err error) (*DeadWeb, error) {
		_ = d.Close()
		return nil, err
	}

	refused, refusedAddr, err := reservePort(ip(1))
	if err != nil {
		return fail(fmt.Errorf("testweb: reserve a refused port on %s: %w", ip(1), err))
	}
	d.refused = refused
	if d.silent, err = net.Listen("tcp", net.JoinHostPort(ip(2), "0")); err != nil {
		return fail(fmt.Errorf("testweb: listen: %w", err))
	}
	if d.tlsLn, err = net.Listen("tcp", net.JoinHostPort(ip(3), "0")); err != nil {
		return fail(fmt.Errorf("testweb: listen: %w", err))
	}
	if d.robotsLn, err = net.Listen("tcp", net.JoinHostPort(ip(4), "0")); err != nil {
		return fail(fmt.Errorf("testweb: listen: %w", err))
	}
	roots := map[DeadKind]string{
		DeadDNS:     "http://" + deadName,
		DeadRefused: "http://" + refusedAddr,
		DeadSilent:  "http://" + d.silent.Addr().String(),
		DeadTLS:     "https://" + d.tlsLn.Addr().String(),
		DeadRobots:  "http://" + d.robotsLn.Addr().String(),
	}
	var extra []string
	for _, k := range deadKinds {
		h := DeadHost{Kind: k, Root: roots[k], Reason: deadReasons[k]}
		for _, p := range deadPaths {
			h.URLs = append(h.URLs, h.Root+p)
		}
		d.hosts = append(d.hosts, h)
		extra = append(extra, h.URLs...)
	}

	d.serving.Add(2)
	go d.accept(d.silent, DeadSilent, d.holdSilent)
	go d.accept(d.tlsLn, DeadTLS, d.answerGarbage)
	d.robotsSrv = &http.Server{Handler: http.HandlerFunc(d.serveRobots503), ReadHeaderTimeout: 10 * time.Second}
	d.serving.Add(1)
	go func() {
		defer d.serving.Done()
		_ = d.robotsSrv.Serve(d.robotsLn) // http.ErrServerClosed after Close
	}()

	d.live, err = start(Config{
		Hosts:        cfg.LiveHosts,
		PagesPerHost: cfg.PagesPerHost,
		LinksPerPage: 8,
		NavLinks:     3,
		PageBytes:    2048,
		CrossHost:    true,
		NoExtras:     true,
		Base:         cfg.Base,
	}, extra)
	if err != nil {
		return fail(err)
	}
	return d, nil
}

// accept counts and hands every connection of ln to handle until ln closes.
func (d *DeadWeb) accept(ln net.Listener, kind DeadKind, handle func(net.Conn)) {
	defer d.serving.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			c.Close()
			return
		}
		d.conns[kind]++
		d.open[c] = true
		d.serving.Add(1)
		d.mu.Unlock()
		go func() {
			defer d.serving.Done()
			defer d.forget(c)
			handle(c)
		}()
	}
}

func (d *DeadWeb) forget(c net.Conn) {
	c.Close()
	d.mu.Lock()
	delete(d.open, c)
	d.mu.Unlock()
}

// holdSilent reads what the client sends and never writes, until the
// client gives up or Close.
func (d *DeadWeb) holdSilent(c net.Conn) {
	_, _ = io.Copy(io.Discard, c)
}

// garbage is what the TLS host answers a ClientHello with.
const garbage = "SSH-2.0-testweb_not_tls\r\nProtocol mismatch.\r\n"

// answerGarbage reads the ClientHello, answers garbage, and waits for the
// client to close (closing first could turn the garbage into a reset).
func (d *DeadWeb) answerGarbage(c net.Conn) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 4096)); err != nil {
		return
	}
	if _, err := io.WriteString(c, garbage); err != nil {
		return
	}
	_, _ = io.Copy(io.Discard, c)
}

// deadPage is what the robots.txt-503 host serves for any other path: a
// crawler that fetches it ignored the 503.
var deadPage = []byte("<!DOCTYPE html>\n<html><body><p>robots.txt answered 503: a polite crawler never sees this.</p></body></html>\n")

func (d *DeadWeb) serveRobots503(rw http.ResponseWriter, r *http.Request) {
	status, body, ctype := http.StatusOK, deadPage, contentHTML
	if r.URL.Path == "/robots.txt" {
		status, body, ctype = http.StatusServiceUnavailable, []byte("robots.txt is unavailable\n"), "text/plain; charset=utf-8"
	}
	d.mu.Lock()
	d.reqs = append(d.reqs, Request{URL: "http://" + r.Host + r.URL.RequestURI(), Host: r.Host, UA: r.UserAgent(), Start: time.Now(), Status: status})
	d.mu.Unlock()
	rw.Header().Set("Content-Type", ctype)
	rw.Header().Set("Content-Length", strconv.Itoa(len(body)))
	rw.WriteHeader(status)
	_, _ = rw.Write(body)
}

// Web returns the live web: its Pages are Live, and it counts their
// requests (Missing, Duplicates, Count, Requests).
func (d *DeadWeb) Web() *Web { return d.live }

// Seeds returns the root URL of every live host.
func (d *DeadWeb) Seeds() []string { return d.live.Seeds() }

// Scope returns regular expressions that match the URLs of every host,
// live and dead, to be the campaign's scope: without them a campaign's
// scope is its seeds' hosts, and the dead links would be out of it. The
// hosts are on loopback, so the campaign must also allow private
// addresses.
func (d *DeadWeb) Scope() []string {
	return []string{
		fmt.Sprintf(`^https?://127\.%d\.[01]\.[0-9]+(:[0-9]+)?/`, d.cfg.Base),
		`^https?://` + regexp.QuoteMeta(deadName) + `(:[0-9]+)?/`,
	}
}

// Live returns every live page URL: a crawl must fetch each of them.
func (d *DeadWeb) Live() []string { return d.live.Pages() }

// Dead returns every dead URL the live pages link to, with the failure
// reason a crawl must report for it (DeadHost.Reason).
func (d *DeadWeb) Dead() map[string]string {
	out := map[string]string{}
	for _, h := range d.hosts {
		for _, u := range h.URLs {
			out[u] = h.Reason
		}
	}
	return out
}

// DeadHosts returns the dead hosts, one of each DeadKind, in the order
// dns, refused, silent, tls, robots503.
func (d *DeadWeb) DeadHosts() []DeadHost {
	out := make([]DeadHost, len(d.hosts))
	for i, h := range d.hosts {
		h.URLs = append([]string(nil), h.URLs...)
		out[i] = h
	}
	return out
}

// DeadHost returns the dead host of kind k.
func (d *DeadWeb) DeadHost(k DeadKind) DeadHost {
	for _, h := range d.DeadHosts() {
		if h.Kind == k {
			return h
		}
	}
	return DeadHost{}
}

// Disallowed returns the live URLs that the live pages link to and
// robots.txt forbids (one /private/ page per live host): a crawl must not
// fetch them; a failure report may list them with reason "robots".
func (d *DeadWeb) Disallowed() []string {
	var out []string
	for h, a := range d.live.Hosts() {
		out = append(out, fmt.Sprintf("http://%s%ssecret-%d.html", a, privatePath, h))
	}
	return out
}

// Conns returns how many connections the silent or the TLS host (k) has
// accepted; 0 for the other kinds (the DNS and refused hosts accept none,
// the robots.txt-503 host's requests are in DeadRequests).
func (d *DeadWeb) Conns(k DeadKind) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conns[k]
}

// DeadRequests returns the requests the robots.txt-503 host saw, in order:
// its robots.txt, and any page a crawler should not have fetched.
func (d *DeadWeb) DeadRequests() []Request {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Request(nil), d.reqs...)
}

// Close stops every host, live and dead, and closes their connections.
// Calls after the first return the first result.
func (d *DeadWeb) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		closeIt := func(c io.Closer) {
			if c != nil {
				if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
					errs = append(errs, err)
				}
			}
		}
		if d.live != nil {
			closeIt(d.live)
		}
		if d.robotsSrv != nil {
			closeIt(d.robotsSrv) // closes robotsLn
		} else if d.robotsLn != nil {
			closeIt(d.robotsLn)
		}
		if d.refused != nil {
			closeIt(d.refused)
		}
		if d.silent != nil {
			closeIt(d.silent)
		}
		if d.tlsLn != nil {
			closeIt(d.tlsLn)
		}
		d.mu.Lock()
		d.closed = true
		for c := range d.open {
			c.Close()
		}
		d.mu.Unlock()
		d.serving.Wait()
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/urlrule"
)

// Default timeouts of one fetch (DefaultTimeouts). With them a host that
// never answers fails within 20 s: a silent DNS server within DNSTimeout,
// a dropped SYN within DialTimeout, a listener that accepts and says
// nothing within TLSHandshakeTimeout (https) or ResponseHeaderTimeout.
const (
	DNSTimeout            = 10 * time.Second
	DialTimeout           = 10 * time.Second
	TLSHandshakeTimeout   = 10 * time.Second
	ResponseHeaderTimeout = 20 * time.Second
	// ResponseTimeout bounds a whole fetch, body included: a server that
	// trickles bytes cannot hold a fetch slot longer. A body over the spool
	// threshold earns more time as it arrives (largeBodyRate).
	ResponseTimeout = 60 * time.Second
	// MaxRetryAfter caps the wait a Retry-After header can ask for.
	MaxRetryAfter = time.Hour
	// readBufferSize is the transport's read buffer per connection. At
	// net/http's default (4 KB) a page of a few tens of KB takes one read
	// syscall per 4 KB plus the one that finds nothing and parks; with
	// 32 KB the head and body of a typical page come in one read. On the
	// dev stack (10,000 pages of about 8 KB) the worker's syscalls went
	// from 9.9 to 5.0 per page, its reads from 4.9 to 2.4 (bench
	// -dev-perf-events). It costs 32 KB per open connection (maxIdleConns
	// idle at most: 8 MB).
	readBufferSize = 32 << 10
	// maxIdleConns bounds the keep-alive connections a Fetcher keeps idle
	// (maxIdleConnsPerHost per host), the oldest closed first. An idle
	// connection holds about 40 KB of buffers the collector cannot free
	// (readBufferSize, a 4 KB write buffer, its head recording), which a
	// worker's GOGC of 400 lets count five times: at 1,024 idle, on a web
	// of 1,000 hosts x 100 pages (bench, scale), they were 37 of the
	// worker's 58 MB live and its RSS was 382 MB; at 256 its RSS was 216
	// MB, at the same pages/s and CPU per page. At 10,000 hosts a
	// connection is seldom reused either way (2.7 requests a connection
	// at 1,024, 2.2 at 256): 256 cost the worker about 3% more CPU there,
	// for 160 MB less RSS.
	maxIdleConns        = 256
	maxIdleConnsPerHost = 8
	// maxRobotsRedirects is how many redirects FetchRobots follows (RFC
	// 9309 section 2.3.1.2 asks for at least five).
	maxRobotsRedirects = 5
)

// Sentinel errors of Fetch, in Result.Err (wrapped) and, as text, in
// Page.Err.
var (
	// ErrRedirectHops: a redirect's target was dropped because following it
	// would exceed the campaign's MaxRedirects.
	ErrRedirectHops = errors.New("redirect hop limit")
	// ErrRobots: robots.txt disallows the URL (Request.Robots).
	ErrRobots = errors.New("disallowed by robots.txt")
	// ErrStatus: the server answered with a status that asks for a retry
	// (5xx, 429); on the last attempt it is the page's Err. The error is a
	// *StatusError, which carries the code.
	ErrStatus = errors.New("retryable status")
)

// Fetcher fetches pages for one campaign. It is safe for concurrent use;
// one Fetcher holds one connection pool.
type Fetcher struct {
	cfg       campaign.Config
	scope     *urlrule.Scope
	transport *http.Transport
	client    *http.Client
	guard     *addrGuard
	timeouts  Timeouts
	resolver  *net.Resolver
	// lookup, when set, answers host names instead of resolver (WithLookup).
	lookup LookupFunc

	// now is the clock of FetchedAt and of Retry-After dates.
	now func() time.Time
	// rootCAs, when set, replaces the system's roots (tests).
	rootCAs *x509.CertPool
	// spoolAt is the largest body held in memory, spoolDir where larger
	// ones are spooled (WithSpool).
	spoolAt  int64
	spoolDir string

	closeOnce sync.Once
}

// New returns a Fetcher for cfg, which must have been through
// WithDefaults, configured further by opts. It speaks HTTP/1.1 only (so
// that the raw request and response head can be recorded as they went over
// the wire, for WARC), uses no proxy (a proxy would bypass the address
// guard), and never follows redirects.
func New(cfg campaign.Config, opts ...Option) (*Fetcher, error) {
	scope, err := urlrule.NewScope(cfg)
	if err != nil {
		return nil, err
	}
	guard, err := newAddrGuard(cfg.AllowPrivate, cfg.AllowAddrs)
	if err != nil {
		return nil, err
	}
	f := &Fetcher{
		cfg:      cfg,
		scope:    scope,
		guard:    guard,
		timeouts: DefaultTimeouts(),
		resolver: net.DefaultResolver,
		now:      time.Now,
		spoolAt:  DefaultSpoolThreshold,
	}
	for _, o := range opts {
		o(f)
	}
	if err := f.timeouts.Validate(); err != nil {
		return nil, err
	}
	to := f.timeouts
	dialer := f.newDialer()
	f.transport = &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &recConn{Conn: c}, nil
		},
		DialTLSContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			host, _, _ := net.SplitHostPort(addr)
			tc := tls.Client(c, &tls.Config{
				ServerName: host,
				MinVersion: tls.VersionTLS12,
				NextProtos: []string{"http/1.1"},
				RootCAs:    f.rootCAs,
			})
			hctx, cancel := context.WithTimeout(ctx, to.TLSHandshake)
			defer cancel()
			if err := tc.HandshakeContext(hctx); err != nil {
				c.Close()
				return nil, &handshakeError{err}
			}
			return &recConn{Conn: tc}, nil
		},
		DisableCompression:     true,
		ReadBufferSize:         readBufferSize,
		MaxIdleConns:           maxIdleConns,
		MaxIdleConnsPerHost:    maxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    to.TLSHandshake,
		ResponseHeaderTimeout:  to.ResponseHeader,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: rawCap,
	}
	f.client = &http.Client{
		Transport: f.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	return f, nil
}

// newDialer is the guarded dialer of New: its resolver (or lookup hook)
// and timeouts, the guard checking every address before and at connect.
func (f *Fetcher) newDialer() *guardedDialer {
	return &guardedDialer{
		guard: f.guard,
		dialer: &net.Dialer{
			KeepAlive: 30 * time.Second,
			Control:   f.guard.control,
		},
		resolver:       f.resolver,
		lookup:         f.lookup,
		resolveTimeout: f.timeouts.DNS,
		connectTimeout: f.timeouts.Connect,
	}
}

// ResolveIP is the address a request to the host of rootURL would dial
// first: the first the resolver (or the lookup hook) answers that the
// address guard allows. Nothing is sent to the host.
func (f *Fetcher) ResolveIP(ctx context.Context, rootURL string) (string, error) {
	u, err := url.Parse(rootURL)
	if err != nil || u.Hostname() == "" {
		return "", fmt.Errorf("resolve %q: %w", rootURL, urlrule.ErrInvalidURL)
	}
	ips, err := f.newDialer().addrs(ctx, u.Hostname())
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", u.Hostname(), err)
	}
	return ips[0].Unmap().String(), nil
}

// Scope is the fetcher's scope, shared by every Fetch (its trap guard counts
// across them).
func (f *Fetcher) Scope() *urlrule.Scope { return f.scope }

// Close releases idle connections. Fetch must not be called after.
func (f *Fetcher) Close() {
	f.closeOnce.Do(f.transport.CloseIdleConnections)
}

// response is one HTTP exchange as recorded.
type response struct {
	resp       *http.Response
	statusLine string
	header     []byte
	request    []byte
	body
	ip string
}

// do sends a GET for u and reads the body up to limit bytes (<= 0: no
// cap). With dl (a page's fetch, not robots.txt) a body larger than
// f.spoolAt is spooled, and moves dl on as it arrives. The returned
// error is a transport error (no response, or the body could not be read);
// once a byte of the response has arrived it is wrapped in afterResponse,
// so that Classify does not hold it against the host. When the response
// head arrives, *answered (if not nil) is set to the time: the server had
// started handling the request by then.
func (f *Fetcher) do(ctx context.Context, u string, prior *page.Capture, limit int64, dl *deadline, answered *time.Time) (*response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8")
	req.Header.Set("Accept-Encoding", "gzip")
	if prior != nil {
		if prior.ETag != "" {
			req.Header.Set("If-None-Match", prior.ETag)
		}
		if prior.LastModified != "" {
			req.Header.Set("If-Modified-Since", prior.LastModified)
		}
	}

	var (
		mu        sync.Mutex
		rc        *recConn
		firstByte bool
		out       = &response{}
	)
	trace := &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) {
			mu.Lock()
			defer mu.Unlock()
			if c, ok := info.Conn.(*recConn); ok {
				rc = c
				rc.start()
			}
			if a, ok := info.Conn.RemoteAddr().(*net.TCPAddr); ok {
				out.ip = a.IP.String()
			}
		},
		GotFirstResponseByte: func() {
			mu.Lock()
			firstByte = true
			mu.Unlock()
		},
	}
	req = req.WithContext(httptrace.WithClientTrace(ctx, trace))
	resp, err := f.client.Do(req)
	if err == nil && answered != nil {
		*answered = time.Now()
	}
	mu.Lock()
	c, began := rc, firstByte
	mu.Unlock()
	var written, read []byte
	if c != nil {
		written, read = c.stop()
	}
	if err != nil {
		err = timeoutCause(ctx, urlrule.UnwrapURLError(err))
		if began {
			err = &afterResponse{err}
		}
		return nil, err
	}
	defer resp.Body.Close()
	out.resp = resp
	out.request = written
	var ok bool
	if out.statusLine, out.header, ok = splitRawHead(read); !ok {
		out.statusLine, out.header = rebuildHead(resp)
	}
	putHeadBuf(read) // the status line and header are copies
	out.body, err = f.readBody(resp.Body, limit, resp.ContentLength, dl)
	if err != nil {
		return out, &afterResponse{fmt.Errorf("reading body: %w", timeoutCause(ctx, err))}
	}
	return out, nil
}

// Fetch fetches req.URL once and reports what to store and what to do
// next (see Result). It never follows a redirect, and never panics on what
// a server sends.
//
// Outcomes:
//   - an answer (any status) is a Page; 2xx HTML pages also yield Links; a
//     3xx with Location yields its target as the only Link (Hops+1), or, past
//     MaxRedirects, no link and Page.Err "redirect hop limit";
//   - a network error, 5xx or 429 is Retry (with RetryAfter from the
//     server), unless req.Attempt >= req.MaxAttempts: then a Page (Status 0
//     for a network error, the answer itself for 5xx/429) with Err;
//   - an invalid URL, an address guard refusal or a robots.txt refusal
//     (req.Robots) is a Page with Status 0 and Err, never retried;
//   - when ctx itself ends (the caller is shutting down), Retry with Err
//     ctx.Err() and no Page, whatever the attempt: nothing was learnt, and
//     Reason is empty.
//
// Every failure has a Reason, with HostDown for a connection-level one
// (Classify); a stored 4xx page has page.Reason4xx, a redirect not followed
// page.ReasonRedirect.
func (f *Fetcher) Fetch(ctx context.Context, req Request) Result {
	var answered time.Time
	res := f.fetch(ctx, req, &answered)
	res.Answered = answered
	return res
}

func (f *Fetcher) fetch(ctx context.Context, req Request, answered *time.Time) Result {
	start := f.now().UTC()
	pg := &page.Page{
		URL:       req.URL,
		Campaign:  f.cfg.ID,
		FetchedAt: start,
		Depth:     req.Depth,
		Parent:    req.Parent,
	}
	norm, err := urlrule.Normalize(req.URL, nil, nil)
	if err != nil {
		return permanent(pg, fmt.Errorf("invalid url: %w", err))
	}
	pg.URL = norm
	u, _ := url.Parse(norm) // Normalize's output parses
	if req.Robots != nil && !req.Robots.Allowed(u.RequestURI()) {
		return permanent(pg, ErrRobots)
	}

	fctx, dl, stop := withDeadline(ctx, f.timeouts.Response)
	defer stop()
	r, err := f.do(fctx, norm, req.Prior, f.cfg.BodyCap, dl, answered)
	if err != nil {
		if ctx.Err() != nil {
			return Result{Retry: true, Err: ctx.Err()}
		}
		var ge *GuardError
		if errors.As(err, &ge) {
			return permanent(pg, ge)
		}
		err = fmt.Errorf("fetch %s: %w", norm, urlrule.UnwrapURLError(err))
		if final(req, f.cfg) {
			return permanent(pg, err)
		}
		reason, down := Classify(err)
		return Result{Retry: true, Err: err, Reason: reason, HostDown: down}
	}

	resp := r.resp
	pg.Status = resp.StatusCode
	pg.StatusLine = r.statusLine
	pg.Header = r.header
	pg.Request = r.request
	parse := r.body.setBody(pg)
	pg.IP = r.ip
	pg.ContentType = resp.Header.Get("Content-Type")
	pg.ContentEncoding = resp.Header.Get("Content-Encoding")
	res := Result{Page: pg, IP: r.ip}

	switch code := resp.StatusCode; {
	case code >= 500 || code == http.StatusTooManyRequests:
		err := &StatusError{Code: code, Status: resp.Status}
		reason := statusReason(code)
		if final(req, f.cfg) {
			pg.Err = err.Error()
			res.Err, res.Reason = err, reason
			return res
		}
		pg.Release() // the page is not stored
		return Result{Retry: true, Status: code, RetryAfter: retryAfter(resp.Header.Get("Retry-After"), f.now()), Err: err, Reason: reason, IP: r.ip}
	case code == http.StatusNotModified:
		f.notModified(&res, req, resp.Header)
	case code >= 300 && code < 400:
		f.redirect(&res, req, u, resp.Header.Get("Location"))
		if pg.Err != "" {
			res.Reason = page.ReasonRedirect
		}
		return res
	case code >= 200 && code < 300:
		f.extract(&res, req, u, resp.Header, parse)
		f.capture(&res, req, resp.Header)
	default:
		res.Reason = statusReason(code)
	}
	return res
}

// permanent is a failure recorded as a page (Status 0) and never retried.
func permanent(pg *page.Page, err error) Result {
	pg.Err = err.Error()
	reason, down := Classify(err)
	return Result{Page: pg, Err: err, Reason: reason, HostDown: down}
}

// final reports whether req is its last attempt.
func final(req Request, cfg campaign.Config) bool {
	maxAttempts := req.MaxAttempts
	if maxAttempts <= 0 {
		maxAttempts = cfg.MaxAttempts
	}
	return max(req.Attempt, 1) >= maxAttempts
}

// redirect turns a 3xx's Location into the page's only link.
func (f *Fetcher) redirect(res *Result, req Request, u *url.URL, location string) {
	if location == "" {
		return
	}
	target, err := urlrule.Normalize(location, u, f.cfg.DropParams)
	if err != nil {
		res.Page.Err = fmt.Sprintf("redirect target: %v", err)
		return
	}
	if req.Hops+1 > f.cfg.RedirectLimit() {
		res.Page.Err = fmt.Sprintf("%v (%d): %s dropped", ErrRedirectHops, f.cfg.RedirectLimit(), target)
		res.Err = ErrRedirectHops
		return
	}
	tu, _ := url.Parse(target)
	l := urlrule.Link{URL: target, Hops: req.Hops + 1, Embeds: req.Embeds}
	if l.Embeds > 0 {
		// An embed's redirect is the same embed, with the same reach.
		if !f.embedInScope(target, l.Embeds, l.Depth(req.Depth), u) {
			return
		}
	} else if !f.inScope(tu, l.Depth(req.Depth), u) {
		return
	}
	res.Links = []urlrule.Link{l}
}

// inScope says whether the campaign's scope takes u, at depth, found on
// parent.
func (f *Fetcher) inScope(u *url.URL, depth int, parent *url.URL) bool {
	ok, _ := f.scope.Allow(u, depth, parent)
	return ok
}

// inScopeNormal is inScope for a URL as urlrule.Normalize returns it.
func (f *Fetcher) inScopeNormal(normal string, depth int, parent *url.URL) bool {
	ok, _ := f.scope.AllowNormal(normal, depth, parent)
	return ok
}

// retryAfter reads a Retry-After header: delay-seconds or an HTTP date,
// capped at MaxRetryAfter; 0 when absent or invalid.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	var d time.Duration
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0
		}
		if n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		d = time.Duration(n) * time.Second
	} else if t, err := http.ParseTime(v); err == nil {
		d = t.Sub(now)
	}
	return min(max(d, 0), MaxRetryAfter)
}

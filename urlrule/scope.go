package urlrule

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/drover-crawl/drover/campaign"
)

// Trap guard limits of Scope. They are on in every campaign: a crawler
// trap (calendars, session IDs in paths, relative links that nest forever)
// otherwise eats a host's whole budget.
const (
	// MaxPathSegments: a path with more segments is refused. Heritrix's
	// TooManyPathSegmentsDecideRule uses 20 as well; real sites rarely go
	// past 12.
	MaxPathSegments = 20
	// MaxSegmentRepeats: a path in which one non-empty segment occurs this
	// many times or more is refused (/x/x/x, /a/b/a/b/a/b, or relative links
	// that keep nesting: /p/img/p/img/p/img).
	MaxSegmentRepeats = 3
	// MaxPatternDepth: a link whose generated pattern (host, path and
	// query with every run of digits replaced by "N", as /calendar/N/N) is
	// its page's own pattern is refused beyond this depth. An endless
	// generated space (a calendar whose every month links to the next, a
	// session id in every link) grows one level per page along such a
	// chain and ends here after at most about twice this many pages (both
	// directions), while a site's real numbered pages (/p/17.html,
	// /product/123) sit at shallow depths however many there are.
	MaxPatternDepth = 100
)

// Reasons Scope.Allow gives for a refusal.
const (
	ReasonScheme      = "not http(s)"
	ReasonTooLong     = "trap: url longer than 2048 bytes"
	ReasonDepth       = "deeper than max_depth"
	ReasonExcluded    = "excluded"
	ReasonOutOfScope  = "out of scope"
	ReasonSegments    = "trap: too many path segments"
	ReasonRepeats     = "trap: repeated path segment"
	ReasonGenerated   = "trap: endless generated url space"
	ReasonInvalidHost = "invalid host"
)

// Scope decides which discovered URLs a campaign crawls. It is safe for
// concurrent use.
//
// A URL is in scope when it matches one of cfg.Scope's regexes or, without
// any, when its host (HostKey) is one of the seeds' hosts (cfg.Seeds' and
// cfg.SeedHosts); a URL a live include (cfg.Live.Include, and the newer
// rules TakeRules is given) matches is in scope too. It is then
// refused when it matches one of cfg.Exclude, is deeper than cfg.MaxDepth
// (nil: no limit; 0: the seeds only), or trips a trap guard (see the constants above).
//
// The generated-space guard is stateless (see MaxPatternDepth): an earlier
// version counted distinct URLs per pattern in each fetcher, which cut real
// sites with more than a few hundred numbered pages and still let every
// fetcher crawl its own share of a trap.
type Scope struct {
	hosts   map[string]bool
	scope   []*regexp.Regexp
	include atomic.Pointer[includes] // live includes (TakeRules)
	exclude []*regexp.Regexp
	depth   int // -1: no limit
}

// NewScope compiles cfg's scope rules.
func NewScope(cfg campaign.Config) (*Scope, error) {
	s := &Scope{
		hosts: map[string]bool{},
		depth: -1,
	}
	if n, ok := cfg.DepthLimit(); ok {
		s.depth = n
	}
	for _, seed := range cfg.Seeds {
		h, err := HostKey(seed)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", seed, err)
		}
		s.hosts[h] = true
	}
	for _, h := range cfg.SeedHosts {
		s.hosts[strings.ToLower(h)] = true
	}
	s.include.Store(&includes{version: -1})
	if _, err := s.TakeRules(cfg.Live); err != nil {
		return nil, err
	}
	for _, r := range cfg.Scope {
		re, err := regexp.Compile(r)
		if err != nil {
			return nil, fmt.Errorf("scope %q: %w", r, err)
		}
		s.scope = append(s.scope, re)
	}
	for _, r := range cfg.Exclude {
		re, err := regexp.Compile(r)
		if err != nil {
			return nil, fmt.Errorf("exclude %q: %w", r, err)
		}
		s.exclude = append(s.exclude, re)
	}
	return s, nil
}

// includes are the live includes of one rules version.
type includes struct {
	version int64
	res     []*regexp.Regexp
}

// TakeRules widens the scope by the live includes of r, when r is newer
// than the rules it took last (a scheduler pushes them to a running
// fetcher session: session.FrameRules); older or equal rules are ignored,
// so that rules reaching it out of order keep the newest. It reports
// whether it took r. The checks under way finish with the includes they
// began with.
func (s *Scope) TakeRules(r campaign.Rules) (bool, error) {
	next := &includes{version: r.Version}
	for _, src := range r.Include {
		re, err := regexp.Compile(src)
		if err != nil {
			return false, fmt.Errorf("include %q: %w", src, err)
		}
		next.res = append(next.res, re)
	}
	for {
		cur := s.include.Load()
		if r.Version <= cur.version {
			return false, nil
		}
		if s.include.CompareAndSwap(cur, next) {
			return true, nil
		}
	}
}

// Allow reports whether u, found at depth on page parent (nil for a seed),
// is to be crawled, and why not. u should be normalized (Normalize).
func (s *Scope) Allow(u *url.URL, depth int, parent *url.URL) (ok bool, reason string) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, ReasonScheme
	}
	return s.allow(target{
		str: u.String(), host: u.Host, hostname: u.Hostname(),
		path: u.EscapedPath(), query: u.RawQuery,
	}, depth, parent, false)
}

// AllowNormal is Allow for a URL as Normalize returns it, read as it is
// rather than parsed again: the worker checks every link of every page,
// and a second url.Parse of each was a fifth of link extraction's cost.
// FuzzAllowNormalMatchesAllow holds it to Allow of the parsed
// URL. A string that is not in Normalize's form is refused.
func (s *Scope) AllowNormal(normal string, depth int, parent *url.URL) (ok bool, reason string) {
	t, ok := splitNormal(normal)
	if !ok {
		return false, ReasonScheme
	}
	return s.allow(t, depth, parent, false)
}

// AllowEmbedNormal is AllowNormal for an embed (Link.Embeds > 0) within
// the campaign's embed hops: it may leave the scope (its host need not be
// a seed's, nor match a scope regex), as an image on a CDN does, while
// every other rule holds (excludes, the depth limit, the trap guards).
func (s *Scope) AllowEmbedNormal(normal string, depth int, parent *url.URL) (ok bool, reason string) {
	t, ok := splitNormal(normal)
	if !ok {
		return false, ReasonScheme
	}
	return s.allow(t, depth, parent, true)
}

// target is what Allow reads of a URL: its string form, host (with the
// port), host name, escaped path and raw query.
type target struct {
	str, host, hostname, path, query string
}

// splitNormal cuts a normalized URL, "scheme://host[:port]/path[?query]",
// into a target; ok is false when the scheme is not http(s).
func splitNormal(n string) (t target, ok bool) {
	scheme, rest, found := strings.Cut(n, "://")
	if !found || (scheme != "http" && scheme != "https") {
		return target{}, false
	}
	t.str = n
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		t.host, rest = rest[:i], rest[i:]
	} else {
		t.host, rest = rest, ""
	}
	t.path, t.query, _ = strings.Cut(rest, "?")
	hp := url.URL{Host: t.host}
	t.hostname = hp.Hostname()
	return t, true
}

// allow is Allow past the scheme check; anyHost lets t be out of scope.
func (s *Scope) allow(t target, depth int, parent *url.URL, anyHost bool) (ok bool, reason string) {
	if len(t.str) > MaxURLLength {
		return false, ReasonTooLong
	}
	if s.depth >= 0 && depth > s.depth {
		return false, ReasonDepth
	}
	for _, re := range s.exclude {
		if re.MatchString(t.str) {
			return false, ReasonExcluded
		}
	}
	if r := s.inScope(t, anyHost); r != "" {
		return false, r
	}
	if r := pathTrap(t.path); r != "" {
		return false, r
	}
	if depth > MaxPatternDepth && parent != nil {
		if p := pattern(t.host, t.path, t.query); p != "" && p == urlPattern(parent) {
			return false, ReasonGenerated
		}
	}
	return true, ""
}

// inScope returns why t is out of scope, or "" (anyHost: only a valid
// host is asked for).
func (s *Scope) inScope(t target, anyHost bool) string {
	if anyHost {
		if _, err := fastHost(t.hostname); err != nil {
			return ReasonInvalidHost
		}
		return ""
	}
	for _, re := range s.include.Load().res {
		if re.MatchString(t.str) {
			return ""
		}
	}
	if len(s.scope) > 0 {
		for _, re := range s.scope {
			if re.MatchString(t.str) {
				return ""
			}
		}
		return ReasonOutOfScope
	}
	h, err := fastHost(t.hostname)
	if err != nil {
		return ReasonInvalidHost
	}
	if !s.hosts[h] {
		return ReasonOutOfScope
	}
	return ""
}

// pathTrap applies the path segment guards. It keeps the segments in an
// array rather than a strings.Split slice: it runs on every link.
func pathTrap(path string) string {
	var segs [MaxPathSegments]string
	n := 0
	for rest, more := strings.TrimPrefix(path, "/"), true; more; {
		if n == len(segs) {
			return ReasonSegments
		}
		segs[n], rest, more = strings.Cut(rest, "/")
		n++
	}
	for i, a := range segs[:n] {
		if a == "" {
			continue
		}
		c := 1
		for _, b := range segs[i+1 : n] {
			if a == b {
				c++
			}
		}
		if c >= MaxSegmentRepeats {
			return ReasonRepeats
		}
	}
	return ""
}

// urlPattern replaces every run of digits by "N", or returns "" when there
// is none (a URL with no digits is no generated space).
func urlPattern(u *url.URL) string {
	return pattern(u.Host, u.EscapedPath(), u.RawQuery)
}

// pattern is urlPattern of a URL's host, escaped path and raw query.
func pattern(host, path, query string) string {
	s := host + path
	if query != "" {
		s += "?" + query
	}
	if !strings.ContainsAny(s[len(host):], "0123456789") {
		return ""
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(host)
	digits := false
	for i := len(host); i < len(s); i++ {
		c := s[i]
		if c >= '0' && c <= '9' {
			if !digits {
				b.WriteByte('N')
			}
			digits = true
			continue
		}
		digits = false
		b.WriteByte(c)
	}
	return b.String()
}

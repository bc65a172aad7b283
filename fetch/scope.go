package fetch

import (
	"fmt"
	"hash/fnv"
	"net/url"
	"regexp"
	"strings"
	"sync"

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
	// MaxPatternURLs: once more than this many distinct URLs of one
	// generated pattern (the host, path and query with every run of digits
	// replaced by "N", as /calendar/N/N?day=N) were seen, further URLs of
	// the pattern are refused.
	MaxPatternURLs = 200
	// maxTrackedPatterns bounds the memory of the pattern guard: about
	// 4096 × 201 × 8 bytes (6.6 MB) at worst; when full, an arbitrary
	// pattern still under the limit is forgotten.
	maxTrackedPatterns = 4096
	// maxTrappedPatterns bounds the set of patterns already over the limit.
	maxTrappedPatterns = 16384
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
// any, when its host (HostKey) is one of the seeds' hosts; it is then
// refused when it matches one of cfg.Exclude, is deeper than cfg.MaxDepth
// (0: no limit), or trips a trap guard (see the constants above).
//
// The generated-space guard counts per Scope instance, that is per fetcher
// process, not per campaign: each fetcher refuses a pattern after having
// seen more than MaxPatternURLs of its URLs, so a campaign with N fetchers
// may crawl up to about N × MaxPatternURLs of them. It is approximate by
// design: distinct URLs are counted by 64-bit hash, and its memory is
// bounded by forgetting patterns (which then count again from zero).
type Scope struct {
	hosts   map[string]bool
	scope   []*regexp.Regexp
	exclude []*regexp.Regexp
	depth   int

	mu       sync.Mutex
	patterns map[string][]uint64 // pattern -> hashes of its distinct URLs
	trapped  map[string]bool
}

// NewScope compiles cfg's scope rules.
func NewScope(cfg campaign.Config) (*Scope, error) {
	s := &Scope{
		hosts:    map[string]bool{},
		depth:    cfg.MaxDepth,
		patterns: map[string][]uint64{},
		trapped:  map[string]bool{},
	}
	for _, seed := range cfg.Seeds {
		h, err := HostKey(seed)
		if err != nil {
			return nil, fmt.Errorf("seed %q: %w", seed, err)
		}
		s.hosts[h] = true
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

// Allow reports whether u, found at depth, is to be crawled, and why not.
// u should be normalized (Normalize). Each URL it allows counts towards its
// pattern's limit (once per distinct URL).
func (s *Scope) Allow(u *url.URL, depth int) (ok bool, reason string) {
	if u.Scheme != "http" && u.Scheme != "https" {
		return false, ReasonScheme
	}
	str := u.String()
	if len(str) > MaxURLLength {
		return false, ReasonTooLong
	}
	if s.depth > 0 && depth > s.depth {
		return false, ReasonDepth
	}
	for _, re := range s.exclude {
		if re.MatchString(str) {
			return false, ReasonExcluded
		}
	}
	if len(s.scope) > 0 {
		in := false
		for _, re := range s.scope {
			if re.MatchString(str) {
				in = true
				break
			}
		}
		if !in {
			return false, ReasonOutOfScope
		}
	} else {
		h, err := normalHost(u.Hostname())
		if err != nil {
			return false, ReasonInvalidHost
		}
		if !s.hosts[h] {
			return false, ReasonOutOfScope
		}
	}
	if r := pathTrap(u.EscapedPath()); r != "" {
		return false, r
	}
	if !s.countPattern(u, str) {
		return false, ReasonGenerated
	}
	return true, ""
}

// pathTrap applies the path segment guards.
func pathTrap(path string) string {
	segs := strings.Split(strings.TrimPrefix(path, "/"), "/")
	if len(segs) > MaxPathSegments {
		return ReasonSegments
	}
	for i, a := range segs {
		if a == "" {
			continue
		}
		n := 1
		for _, b := range segs[i+1:] {
			if a == b {
				n++
			}
		}
		if n >= MaxSegmentRepeats {
			return ReasonRepeats
		}
	}
	return ""
}

// urlPattern replaces every run of digits by "N", or returns "" when there
// is none (a URL with no digits is no generated space).
func urlPattern(u *url.URL) string {
	s := u.Host + u.EscapedPath()
	if u.RawQuery != "" {
		s += "?" + u.RawQuery
	}
	if !strings.ContainsAny(s[len(u.Host):], "0123456789") {
		return ""
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(u.Host)
	digits := false
	for i := len(u.Host); i < len(s); i++ {
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

// countPattern records str under its pattern and reports whether the
// pattern is still under MaxPatternURLs.
func (s *Scope) countPattern(u *url.URL, str string) bool {
	p := urlPattern(u)
	if p == "" {
		return true
	}
	h := fnv.New64a()
	h.Write([]byte(str))
	sum := h.Sum64()

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.trapped[p] {
		return false
	}
	seen := s.patterns[p]
	for _, x := range seen {
		if x == sum {
			return true
		}
	}
	if len(seen) >= MaxPatternURLs {
		delete(s.patterns, p)
		if len(s.trapped) >= maxTrappedPatterns {
			for k := range s.trapped {
				delete(s.trapped, k)
				break
			}
		}
		s.trapped[p] = true
		return false
	}
	if seen == nil && len(s.patterns) >= maxTrackedPatterns {
		for k := range s.patterns {
			delete(s.patterns, k)
			break
		}
	}
	s.patterns[p] = append(seen, sum)
	return true
}

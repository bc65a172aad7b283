package campaign

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// RevisitRule says when a continuous campaign fetches a URL again. The
// first rule whose Match, MIME and Depth all fit a fetched URL decides its
// next fetch; a URL no rule fits is fetched once.
//
// The interval adapts to the page, as StormCrawler's adaptive schedule
// does: the first is Min; after a fetch that found the page changed it is
// divided by Factor, after one that found it unchanged (a 304, or the same
// payload digest) it is multiplied by Factor, and it stays within [Min,
// Max]. Factor 1 keeps Min for ever.
type RevisitRule struct {
	// Match is a regex on the URL; empty fits every URL.
	Match string `json:"match,omitempty" yaml:"match,omitempty"`
	// MIME is a prefix of the response's media type ("text/html",
	// "image/"); empty fits every type. A fetch without a response (a
	// failure) fits only a rule without MIME.
	MIME string `json:"mime,omitempty" yaml:"mime,omitempty"`
	// Depth, when set, fits only URLs at most that many links from a seed:
	// 0 fits the seeds alone (the campaign's and `starter seed`'s), which a
	// news crawl revisits often to find new articles. Unset fits every
	// depth.
	Depth *int `json:"depth,omitempty" yaml:"depth,omitempty"`
	// Min is the shortest interval, and the first: at least MinRevisit.
	Min time.Duration `json:"min" yaml:"min"`
	// Max is the longest interval; 0: Min (a fixed interval).
	Max time.Duration `json:"max,omitempty" yaml:"max,omitempty"`
	// Factor is what a change divides the interval by and what no change
	// multiplies it by, between 1 and 100; 0: DefaultRevisitFactor.
	Factor float64 `json:"factor,omitempty" yaml:"factor,omitempty"`
}

// Limits and defaults of revisit rules.
const (
	MinRevisit           = time.Second
	MaxRevisitRules      = 64
	DefaultRevisitFactor = 2
)

// Continuous reports whether the campaign revisits: it has revisit rules,
// and does not end when its frontier drains.
func (c Config) Continuous() bool { return len(c.Revisit) > 0 }

// Revisits are a campaign's revisit rules, compiled.
type Revisits struct {
	rules []RevisitRule
	res   []*regexp.Regexp // nil for a rule without Match
}

// CompileRevisits compiles rules (Config.Revisit); nil when there are none.
func CompileRevisits(rules []RevisitRule) (*Revisits, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	rs := &Revisits{rules: rules, res: make([]*regexp.Regexp, len(rules))}
	for i, r := range rules {
		if r.Match == "" {
			continue
		}
		re, err := regexp.Compile(r.Match)
		if err != nil {
			return nil, fmt.Errorf("revisit rule %d: match %q: %w", i+1, r.Match, err)
		}
		rs.res[i] = re
	}
	return rs, nil
}

// For is the first rule that fits url at depth links from a seed and
// mime (mime "" when the fetch had no response), nil when none does (or
// rs is nil).
func (rs *Revisits) For(url string, depth int, mime string) *RevisitRule {
	if rs == nil {
		return nil
	}
	for i := range rs.rules {
		r := &rs.rules[i]
		if r.Depth != nil && depth > *r.Depth {
			continue
		}
		if r.MIME != "" && (mime == "" || !strings.HasPrefix(strings.ToLower(mime), strings.ToLower(r.MIME))) {
			continue
		}
		if rs.res[i] == nil || rs.res[i].MatchString(url) {
			return r
		}
	}
	return nil
}

// Next is the interval after a fetch: prev is the interval that led to
// it (0: the URL's first fetch under the rule), changed whether the page
// changed since the fetch before.
func (r RevisitRule) Next(prev time.Duration, changed bool) time.Duration {
	lo, hi := r.Min, max(r.Max, r.Min)
	if prev <= 0 {
		return lo
	}
	f := r.Factor
	if f == 0 {
		f = DefaultRevisitFactor
	}
	next := float64(prev) * f
	if changed {
		next = float64(prev) / f
	}
	return time.Duration(math.Min(math.Max(next, float64(lo)), float64(hi)))
}

func (c Config) checkRevisit() []error {
	var errs []error
	if c.NoHistory && len(c.Revisit) > 0 {
		errs = append(errs, errors.New("revisit: a continuous campaign keeps its URLs' fetch history (drop no_history)"))
	}
	if c.NoHistory && c.Dedup {
		errs = append(errs, errors.New("dedup: the digest index lives in the fetch history (drop no_history)"))
	}
	if len(c.Revisit) > MaxRevisitRules {
		errs = append(errs, fmt.Errorf("revisit: %d rules, at most %d", len(c.Revisit), MaxRevisitRules))
	}
	for i, r := range c.Revisit {
		if r.Min < MinRevisit {
			errs = append(errs, fmt.Errorf("revisit rule %d: min %s: must be at least %s", i+1, r.Min, MinRevisit))
		}
		if r.Depth != nil && *r.Depth < 0 {
			errs = append(errs, fmt.Errorf("revisit rule %d: depth %d: must be 0 (the seeds) or more", i+1, *r.Depth))
		}
		if r.Max != 0 && r.Max < r.Min {
			errs = append(errs, fmt.Errorf("revisit rule %d: max %s: must be at least min %s (or unset: a fixed interval)", i+1, r.Max, r.Min))
		}
		if r.Factor != 0 && (r.Factor < 1 || r.Factor > 100 || math.IsNaN(r.Factor)) {
			errs = append(errs, fmt.Errorf("revisit rule %d: factor %g: must be between 1 and 100", i+1, r.Factor))
		}
		if _, err := regexp.Compile(r.Match); err != nil {
			errs = append(errs, fmt.Errorf("revisit rule %d: match %q: %v", i+1, r.Match, err))
		}
	}
	return errs
}

// ParseRevisitRule reads a rule as `starter start --revisit` takes it:
// comma-separated min=D, max=D, factor=F, mime=TYPE, depth=N and match=REGEX, in
// any order but match last (its regex runs to the end, commas and all).
// Durations are Go's (10m, 168h) or days (7d).
func ParseRevisitRule(s string) (RevisitRule, error) {
	var r RevisitRule
	rest := s
	for rest != "" {
		var part string
		if strings.HasPrefix(rest, "match=") {
			part, rest = rest, ""
		} else {
			part, rest, _ = strings.Cut(rest, ",")
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return r, fmt.Errorf("revisit %q: %q is not key=value (min=10m,max=168h,factor=2,mime=text/html,depth=0,match=REGEX)", s, part)
		}
		var err error
		switch k {
		case "min":
			r.Min, err = parseDays(v)
		case "max":
			r.Max, err = parseDays(v)
		case "factor":
			r.Factor, err = strconv.ParseFloat(v, 64)
			if err == nil && r.Factor == 0 {
				err = errors.New("0 is no factor (1 keeps the interval fixed)")
			}
		case "mime":
			r.MIME = v
		case "depth":
			var n int
			if n, err = strconv.Atoi(v); err == nil && n < 0 {
				err = errors.New("must be 0 (the seeds) or more")
			}
			r.Depth = &n
		case "match":
			r.Match = v
		default:
			err = errors.New("unknown key (min, max, factor, mime, depth, match)")
		}
		if err != nil {
			return r, fmt.Errorf("revisit %q: %s: %v", s, k, err)
		}
	}
	if r.Min == 0 {
		return r, fmt.Errorf("revisit %q: min is required (min=10m)", s)
	}
	return r, nil
}

// parseDays is time.ParseDuration that also takes whole days ("7d").
func parseDays(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 0 || n > 3650 {
			return 0, fmt.Errorf("%q: days must be a whole number up to 3650", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}

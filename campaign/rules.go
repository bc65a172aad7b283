package campaign

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Rules are what an operator changes in a running campaign: excludes and
// host rules, added with `starter exclude` and `starter host` (Temporal
// Updates of the campaign's workflow). The workflow keeps them in its
// history and hands them to every scheduler, which stores them with the
// campaign's marks; Version counts the changes, so that a scheduler keeps
// the latest whatever order they reach it in.
//
// They add to the campaign's Config: an exclude to Exclude, a host rule
// after Hosts (the last rule of a host wins, so a live one overrides the
// started config's).
type Rules struct {
	Version int64    `json:"version,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	// Include widens the scope: a URL one matches is in scope, whatever
	// else the scope says (Config.Scope, or the seeds' hosts). A fetcher
	// session reads it when it starts, and its scheduler pushes newer
	// rules to it while it runs (session.FrameRules).
	Include []string   `json:"include,omitempty"`
	Hosts   []HostRule `json:"hosts,omitempty"`
}

// MaxLiveRules bounds the excludes and the host rules a campaign adds
// while it runs, each: the rules ride in every fetcher session's input.
const MaxLiveRules = 256

// WithExclude returns r with the exclude re added (once) and its version
// advanced.
func (r Rules) WithExclude(re string) Rules {
	out := r.clone()
	if !slices.Contains(out.Exclude, re) {
		out.Exclude = append(out.Exclude, re)
	}
	out.Version++
	return out
}

// WithHost returns r with h merged into the live rule of its host
// (compared without case): the fields h sets replace that rule's, the
// others stay as they were; and its version advanced.
func (r Rules) WithHost(h HostRule) Rules {
	out := r.clone()
	i := slices.IndexFunc(out.Hosts, func(o HostRule) bool { return strings.EqualFold(o.Host, h.Host) })
	if i < 0 {
		out.Hosts = append(out.Hosts, h)
	} else {
		old := out.Hosts[i]
		if h.Delay != nil {
			old.Delay = h.Delay
		}
		if h.Concurrency != nil {
			old.Concurrency = h.Concurrency
		}
		if h.BlockUntil != nil {
			old.BlockUntil = h.BlockUntil
		}
		out.Hosts[i] = old
	}
	out.Version++
	return out
}

// WithInclude returns r with the include re added (once) and its version
// advanced.
func (r Rules) WithInclude(re string) Rules {
	out := r.clone()
	if !slices.Contains(out.Include, re) {
		out.Include = append(out.Include, re)
	}
	out.Version++
	return out
}

func (r Rules) clone() Rules {
	r.Include = slices.Clone(r.Include)
	r.Exclude = slices.Clone(r.Exclude)
	r.Hosts = slices.Clone(r.Hosts)
	return r
}

// Validate checks that every exclude compiles and every host rule is one
// Config.Validate takes, within MaxLiveRules.
func (r Rules) Validate() error {
	var errs []error
	if len(r.Exclude) > MaxLiveRules || len(r.Include) > MaxLiveRules || len(r.Hosts) > MaxLiveRules {
		errs = append(errs, fmt.Errorf("live rules: at most %d excludes, %d includes and %d host rules", MaxLiveRules, MaxLiveRules, MaxLiveRules))
	}
	for _, re := range r.Exclude {
		if _, err := regexp.Compile(re); err != nil {
			errs = append(errs, fmt.Errorf("exclude %q: not a valid regular expression: %v", re, err))
		}
	}
	for _, re := range r.Include {
		if _, err := regexp.Compile(re); err != nil {
			errs = append(errs, fmt.Errorf("include %q: not a valid regular expression: %v", re, err))
		}
	}
	errs = append(errs, checkHostRules(r.Hosts)...)
	return errors.Join(errs...)
}

// checkHostRules checks host rules, a config's or live ones.
func checkHostRules(hs []HostRule) []error {
	var errs []error
	for _, h := range hs {
		if h.Host == "" {
			errs = append(errs, errors.New("hosts: every entry needs a host name"))
		}
		if h.Delay != nil && (*h.Delay < 0 || *h.Delay > time.Hour) {
			errs = append(errs, fmt.Errorf("hosts %q: delay %s: must be between 0 (no delay) and 1h", h.Host, *h.Delay))
		}
		if h.Concurrency != nil && (*h.Concurrency < 1 || *h.Concurrency > 256) {
			errs = append(errs, fmt.Errorf("hosts %q: concurrency %d: must be between 1 and 256", h.Host, *h.Concurrency))
		}
	}
	return errs
}

// Excludes are the campaign's excludes, the started config's and the live
// ones.
func (c Config) Excludes() []string {
	return append(slices.Clone(c.Exclude), c.Live.Exclude...)
}

// HostBlockedUntil is the BlockUntil of host's last rule that has one (the
// started config's, then the live ones), zero when none.
func (c Config) HostBlockedUntil(host string) time.Time {
	var t time.Time
	for _, h := range append(slices.Clone(c.Hosts), c.Live.Hosts...) {
		if strings.EqualFold(h.Host, host) && h.BlockUntil != nil {
			t = *h.BlockUntil
		}
	}
	return t
}

// MaxAdaptiveDelay bounds the delay DelayFactor gives a slow host.
const MaxAdaptiveDelay = time.Minute

// AdaptiveDelay is the delay DelayFactor asks of a host that answered in
// latency: 0 when off.
func (c Config) AdaptiveDelay(latency time.Duration) time.Duration {
	if c.DelayFactor <= 0 || latency <= 0 {
		return 0
	}
	return min(time.Duration(c.DelayFactor*float64(latency)), MaxAdaptiveDelay)
}

// Package campaign holds a crawl campaign's configuration: the one input
// struct of the Campaign workflow, which the starter builds, the workflow
// carries and every activity, scheduler and fetcher reads.
//
// It is a leaf package (no drover imports) so that workflows, activities,
// frontier and fetch can all depend on it without cycles.
//
// The config is shown by the Temporal Web UI as the workflow's input, so it
// must never hold a secret: Validate refuses a sink URI with a password.
package campaign

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Version is drover's version, used in the default user agent.
const Version = "0.1.0"

// RobotsToken is the product token drover matches in robots.txt groups.
const RobotsToken = "drover"

// DefaultUserAgent is the User-Agent header drover sends unless a campaign
// sets its own.
const DefaultUserAgent = "drover/" + Version + " (+https://github.com/drover-crawl/drover)"

// States of a campaign, as `starter status` and the CampaignState search
// attribute report them.
const (
	StateStarting  = "starting"
	StateRunning   = "running"
	StatePaused    = "paused"
	StateStopping  = "stopping"
	StateCompleted = "completed"
	StateStopped   = "stopped"
	StateFailed    = "failed"
)

// HostRule overrides the campaign's politeness for one host.
type HostRule struct {
	Host        string        `json:"host" yaml:"host"`
	Delay       time.Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	Concurrency int           `json:"concurrency,omitempty" yaml:"concurrency,omitempty"`
}

// Config is a campaign's configuration. Zero values mean "the default";
// WithDefaults fills them in and Validate checks the result.
type Config struct {
	ID    string   `json:"id" yaml:"id"`
	Seeds []string `json:"seeds" yaml:"seeds"`
	// Scope: a URL is in scope when it matches any of these regexes; without
	// one, the seeds' hosts are the scope.
	Scope   []string `json:"scope,omitempty" yaml:"scope,omitempty"`
	Exclude []string `json:"exclude,omitempty" yaml:"exclude,omitempty"`

	Fetchers int `json:"fetchers" yaml:"fetchers"`
	// FetcherConcurrency is how many URLs one FetchSession works on at once
	// (the credit it offers its scheduler).
	FetcherConcurrency int `json:"fetcher_concurrency,omitempty" yaml:"fetcher_concurrency,omitempty"`

	MaxPages        int64         `json:"max_pages,omitempty" yaml:"max_pages,omitempty"`
	MaxPagesPerHost int64         `json:"max_pages_per_host,omitempty" yaml:"max_pages_per_host,omitempty"`
	MaxDepth        int           `json:"max_depth,omitempty" yaml:"max_depth,omitempty"` // 0: unlimited (trap guards still apply)
	MaxDuration     time.Duration `json:"max_duration,omitempty" yaml:"max_duration,omitempty"`

	PerHostConcurrency int           `json:"per_host_concurrency" yaml:"per_host_concurrency"`
	PerHostDelay       time.Duration `json:"per_host_delay" yaml:"per_host_delay"`
	Hosts              []HostRule    `json:"hosts,omitempty" yaml:"hosts,omitempty"`

	Priority   string   `json:"priority" yaml:"priority"`
	UserAgent  string   `json:"user_agent" yaml:"user_agent"`
	Sitemaps   bool     `json:"sitemaps,omitempty" yaml:"sitemaps,omitempty"`
	DropParams []string `json:"drop_params,omitempty" yaml:"drop_params,omitempty"`
	NotifyURL  string   `json:"notify_url,omitempty" yaml:"notify_url,omitempty"`
	Sinks      []string `json:"sinks" yaml:"sinks"`

	AllowPrivate bool `json:"allow_private,omitempty" yaml:"allow_private,omitempty"`
	// AllowAddrs lists exact IP addresses the address guard lets through even
	// when AllowPrivate is off (tests use it for their own server).
	AllowAddrs []string `json:"allow_addrs,omitempty" yaml:"allow_addrs,omitempty"`

	BodyCap      int64 `json:"body_cap,omitempty" yaml:"body_cap,omitempty"`
	MaxRedirects int   `json:"max_redirects,omitempty" yaml:"max_redirects,omitempty"`
	MaxAttempts  int   `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`

	// RestartAlert is the number of fetcher restarts within an hour after
	// which the campaign sends an exception notification.
	RestartAlert int `json:"restart_alert,omitempty" yaml:"restart_alert,omitempty"`

	// HostRetries is how many times a host whose connections fail (DNS,
	// refused, connect timeout, TLS, reset before a response, robots.txt
	// 5xx or unreachable) is tried again before it is declared unreachable
	// for the campaign; its URLs are then settled as failed with that
	// reason, without a fetch each. nil: DefaultHostRetries; 0: the first
	// failure decides.
	HostRetries *int `json:"host_retries,omitempty" yaml:"host_retries,omitempty"`
	// RetryBackoff is the wait before a failing host's first retry; each
	// further retry waits three times longer, with jitter. nil:
	// DefaultRetryBackoff.
	RetryBackoff *time.Duration `json:"retry_backoff,omitempty" yaml:"retry_backoff,omitempty"`
	// FailAfter: a campaign whose every fetcher keeps failing, with no
	// page fetched, for this long ends as failed with the fetchers' reason.
	// nil: DefaultFailAfter.
	FailAfter *time.Duration `json:"fail_after,omitempty" yaml:"fail_after,omitempty"`
}

// Defaults of DESIGN.md, "The operator's commands".
const (
	DefaultFetchers           = 4
	DefaultFetcherConcurrency = 32
	DefaultPerHostConcurrency = 1
	DefaultPerHostDelay       = time.Second
	DefaultPriority           = "bfs"
	DefaultBodyCap            = 1 << 20
	DefaultMaxRedirects       = 10
	DefaultMaxAttempts        = 3
	DefaultRestartAlert       = 5
	DefaultHostRetries        = 2
	DefaultRetryBackoff       = 15 * time.Second
	DefaultFailAfter          = 5 * time.Minute
	// DefaultSink is the topic drover.pages on the worker's KAFKA_BROKERS.
	DefaultSink = "kafka:///drover.pages"
	MaxFetchers = 1024
)

// WithDefaults returns c with every unset field set to its default.
// defaultSink is used when c names no sink (the worker's KAFKA_BROKERS).
func (c Config) WithDefaults() Config {
	if c.Fetchers == 0 {
		c.Fetchers = DefaultFetchers
	}
	if c.FetcherConcurrency == 0 {
		c.FetcherConcurrency = DefaultFetcherConcurrency
	}
	if c.PerHostConcurrency == 0 {
		c.PerHostConcurrency = DefaultPerHostConcurrency
	}
	if c.PerHostDelay == 0 {
		c.PerHostDelay = DefaultPerHostDelay
	}
	if c.Priority == "" {
		c.Priority = DefaultPriority
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.BodyCap == 0 {
		c.BodyCap = DefaultBodyCap
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = DefaultMaxRedirects
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.RestartAlert == 0 {
		c.RestartAlert = DefaultRestartAlert
	}
	if len(c.Sinks) == 0 {
		c.Sinks = []string{DefaultSink}
	}
	if c.HostRetries == nil {
		c.HostRetries = ptr(DefaultHostRetries)
	}
	if c.RetryBackoff == nil {
		c.RetryBackoff = ptr(DefaultRetryBackoff)
	}
	if c.FailAfter == nil {
		c.FailAfter = ptr(DefaultFailAfter)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// HostRetryCount is HostRetries, or its default when unset.
func (c Config) HostRetryCount() int {
	if c.HostRetries == nil {
		return DefaultHostRetries
	}
	return *c.HostRetries
}

// HostRetryBackoff is RetryBackoff, or its default when unset.
func (c Config) HostRetryBackoff() time.Duration {
	if c.RetryBackoff == nil {
		return DefaultRetryBackoff
	}
	return *c.RetryBackoff
}

// FailAfterDuration is FailAfter, or its default when unset.
func (c Config) FailAfterDuration() time.Duration {
	if c.FailAfter == nil {
		return DefaultFailAfter
	}
	return *c.FailAfter
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Priorities lists the built-in priority policies by name.
var Priorities = []string{"bfs", "score", "fair"}

// Validate checks a config after WithDefaults; each error names the field
// and its allowed range, and the CLI prints it as it is.
func (c Config) Validate() error {
	var errs []error
	if !idPattern.MatchString(c.ID) {
		errs = append(errs, fmt.Errorf("id %q: must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", c.ID))
	}
	if len(c.Seeds) == 0 {
		errs = append(errs, errors.New("seeds: at least one seed URL is required"))
	}
	for _, s := range c.Seeds {
		if err := checkSeed(s); err != nil {
			errs = append(errs, err)
		}
	}
	for _, field := range []struct {
		name string
		res  []string
	}{{"scope", c.Scope}, {"exclude", c.Exclude}} {
		for _, r := range field.res {
			if _, err := regexp.Compile(r); err != nil {
				errs = append(errs, fmt.Errorf("%s %q: not a valid regular expression: %v", field.name, r, err))
			}
		}
	}
	if c.Fetchers < 0 || c.Fetchers > MaxFetchers {
		errs = append(errs, fmt.Errorf("fetchers %d: must be between 0 and %d", c.Fetchers, MaxFetchers))
	}
	if c.FetcherConcurrency < 1 || c.FetcherConcurrency > 1024 {
		errs = append(errs, fmt.Errorf("fetcher_concurrency %d: must be between 1 and 1024", c.FetcherConcurrency))
	}
	if c.MaxPages < 0 {
		errs = append(errs, fmt.Errorf("max_pages %d: must be 0 (no limit) or more", c.MaxPages))
	}
	if c.MaxPagesPerHost < 0 {
		errs = append(errs, fmt.Errorf("max_pages_per_host %d: must be 0 (no limit) or more", c.MaxPagesPerHost))
	}
	if c.MaxDepth < 0 {
		errs = append(errs, fmt.Errorf("max_depth %d: must be 0 (no limit) or more", c.MaxDepth))
	}
	if c.MaxDuration < 0 {
		errs = append(errs, fmt.Errorf("max_duration %s: must be 0 (no limit) or more", c.MaxDuration))
	}
	if c.PerHostConcurrency < 1 || c.PerHostConcurrency > 256 {
		errs = append(errs, fmt.Errorf("per_host_concurrency %d: must be between 1 and 256", c.PerHostConcurrency))
	}
	if c.PerHostDelay < 0 || c.PerHostDelay > time.Hour {
		errs = append(errs, fmt.Errorf("per_host_delay %s: must be between 0 and 1h", c.PerHostDelay))
	}
	for _, h := range c.Hosts {
		if h.Host == "" || h.Delay < 0 || h.Concurrency < 0 || h.Concurrency > 256 {
			errs = append(errs, fmt.Errorf("hosts %q: needs a host name, a delay of 0 or more and a concurrency between 0 and 256", h.Host))
		}
	}
	if !contains(Priorities, c.Priority) {
		errs = append(errs, fmt.Errorf("priority %q: must be one of %s", c.Priority, strings.Join(Priorities, ", ")))
	}
	if c.NotifyURL != "" {
		if u, err := url.Parse(c.NotifyURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("notify_url %q: must be an http or https URL", c.NotifyURL))
		}
	}
	for _, s := range c.Sinks {
		if err := CheckSinkURI(s); err != nil {
			errs = append(errs, err)
		}
	}
	if c.BodyCap < 1024 || c.BodyCap > 64<<20 {
		errs = append(errs, fmt.Errorf("body_cap %d: must be between 1024 and %d bytes", c.BodyCap, 64<<20))
	}
	if c.MaxRedirects < 0 || c.MaxRedirects > 30 {
		errs = append(errs, fmt.Errorf("max_redirects %d: must be between 0 and 30", c.MaxRedirects))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 20 {
		errs = append(errs, fmt.Errorf("max_attempts %d: must be between 1 and 20", c.MaxAttempts))
	}
	if n := c.HostRetryCount(); n < 0 || n > 20 {
		errs = append(errs, fmt.Errorf("host_retries %d: must be between 0 and 20", n))
	}
	if d := c.HostRetryBackoff(); d < 0 || d > time.Hour {
		errs = append(errs, fmt.Errorf("retry_backoff %s: must be between 0 and 1h", d))
	}
	if d := c.FailAfterDuration(); d < 10*time.Second || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("fail_after %s: must be between 10s and 24h", d))
	}
	return errors.Join(errs...)
}

func checkSeed(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("seed %q: not a valid URL: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("seed %q: must be an http or https URL", s)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("seed %q: has no host", s)
	}
	return nil
}

// CheckSinkURI checks the form of a sink URI (kafka://HOST:PORT/TOPIC,
// warc:DIR, postgres://...) and refuses one that carries a password:
// credentials come from the worker's environment, never from the config.
func CheckSinkURI(s string) error {
	switch {
	case strings.HasPrefix(s, "warc:"):
		if strings.TrimPrefix(s, "warc:") == "" {
			return fmt.Errorf("sink %q: warc:DIR needs a directory", s)
		}
		return nil
	case strings.HasPrefix(s, "kafka://"), strings.HasPrefix(s, "postgres://"), strings.HasPrefix(s, "postgresql://"):
		u, err := url.Parse(s)
		if err != nil {
			return fmt.Errorf("sink %q: not a valid URI: %v", Redact(s), err)
		}
		if _, has := u.User.Password(); has {
			return fmt.Errorf("sink %q: must not carry a password (the Web UI shows a campaign's config); give credentials to the worker through its environment (PGPASSWORD, KAFKA_* variables)", Redact(s))
		}
		if u.Query().Has("password") {
			return fmt.Errorf("sink %q: must not carry a password parameter; give credentials to the worker through its environment", Redact(s))
		}
		if u.Scheme == "kafka" && strings.Trim(u.Path, "/") == "" {
			return fmt.Errorf("sink %q: must be kafka://HOST:PORT/TOPIC (or kafka:///TOPIC for the worker's KAFKA_BROKERS)", s)
		}
		return nil
	default:
		return fmt.Errorf("sink %q: unknown kind; use kafka://HOST:PORT/TOPIC, warc:DIR or postgres://HOST/DB", Redact(s))
	}
}

// Redact returns a URI with its password, in its user info or as a
// password= query parameter, replaced by ***, for messages and logs.
func Redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparseable URI)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "***")
		u.RawQuery = strings.ReplaceAll(q.Encode(), "%2A%2A%2A", "***")
	}
	if u.User == nil {
		return u.String()
	}
	if _, ok := u.User.Password(); !ok {
		return u.String()
	}
	// Built by hand: url.UserPassword would percent-encode the asterisks.
	user := u.User.Username()
	u.User = nil
	scheme, rest, _ := strings.Cut(u.String(), "://")
	return scheme + "://" + url.User(user).String() + ":***@" + rest
}

// PolitenessFor returns the delay and concurrency for a host: a HostRule
// for it if one exists, the campaign's defaults otherwise.
func (c Config) PolitenessFor(host string) (time.Duration, int) {
	d, n := c.PerHostDelay, c.PerHostConcurrency
	for _, h := range c.Hosts {
		if strings.EqualFold(h.Host, host) {
			if h.Delay > 0 {
				d = h.Delay
			}
			if h.Concurrency > 0 {
				n = h.Concurrency
			}
		}
	}
	return d, n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

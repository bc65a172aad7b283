// Validation of a config: every error names the field and its range.

package campaign

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/sink/sinkuri"
)

// policyPattern is the form of a priority policy's name. Which names exist
// is the schedulers' business (frontier.ServerConfig.Policies): the config,
// which is the workflow's input, checks only the form, so that the workflow
// never depends on what a process registered.
var policyPattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,31}$`)

// Validate checks a config after WithDefaults; each error names the field
// and its allowed range, and the CLI prints it as it is.
func (c Config) Validate() error {
	var errs []error
	if !idPattern.MatchString(c.ID) {
		errs = append(errs, fmt.Errorf("id %q: must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", c.ID))
	}
	if err := c.validRun(); err != nil {
		errs = append(errs, err)
	}
	if c.QueueType != "" && c.QueueType != "classic" && c.QueueType != "quorum" {
		errs = append(errs, fmt.Errorf("queue_type %q: must be quorum or classic (or unset: the scheduler's default)", c.QueueType))
	}
	if c.From != "" && !idPattern.MatchString(c.From) {
		errs = append(errs, fmt.Errorf("from %q: must name a campaign ID (1-64 characters of letters, digits, '.', '_' or '-')", c.From))
	}
	if len(c.Seeds) == 0 && c.SeedsFile == "" {
		errs = append(errs, errors.New("seeds: at least one seed URL is required"))
	}
	if len(c.SeedHosts) > MaxSeedHosts || c.SeedHostBytes() > MaxSeedHostBytes {
		errs = append(errs, fmt.Errorf("seed_hosts: %d hosts of %d bytes, at most %d hosts and %d bytes (give scope: regexes instead)",
			len(c.SeedHosts), c.SeedHostBytes(), MaxSeedHosts, MaxSeedHostBytes))
	}
	for _, s := range c.Seeds {
		if err := checkSeed(s); err != nil {
			errs = append(errs, err)
		}
	}
	errs = append(errs, c.checkSeedScores()...)
	errs = append(errs, c.checkRegexps()...)
	errs = append(errs, c.checkLimits()...)
	errs = append(errs, c.checkHosts()...)
	if !policyPattern.MatchString(c.Priority) {
		errs = append(errs, fmt.Errorf("priority %q: must be a policy name: 1-32 lower-case letters, digits, '_' or '-', starting with a letter (built-in: bfs, score, fair)", c.Priority))
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
	if strings.ContainsAny(c.CrawlLog, "\x00\r\n") {
		errs = append(errs, fmt.Errorf("crawl_log %q: must be a directory path, with no NUL or line break", c.CrawlLog))
	}
	switch {
	case c.CrawlLogTopic == "":
	case sinkuri.Lookup(c.CrawlLogTopic) != sinkuri.Kafka:
		errs = append(errs, fmt.Errorf("crawl_log_topic %q: must be kafka://HOST:PORT/TOPIC (or kafka:///TOPIC for the workers' KAFKA_BROKERS)", Redact(c.CrawlLogTopic)))
	default:
		if err := CheckSinkURI(c.CrawlLogTopic); err != nil {
			errs = append(errs, fmt.Errorf("crawl_log_topic: %w", err))
		}
	}
	errs = append(errs, c.checkFetchLimits()...)
	return errors.Join(errs...)
}

// checkRegexps: every scope and exclude rule compiles.
func (c Config) checkRegexps() []error {
	var errs []error
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
	return errs
}

// checkLimits checks the fleet's size and the crawl's limits.
func (c Config) checkLimits() []error {
	var errs []error
	if c.Fetchers < 1 || c.Fetchers > MaxFetchers {
		errs = append(errs, fmt.Errorf("fetchers %d: %s", c.Fetchers, zeroRefused["fetchers"]))
	}
	if c.FetcherConcurrency < 1 || c.FetcherConcurrency > 1024 {
		errs = append(errs, fmt.Errorf("fetcher_concurrency %d: %s", c.FetcherConcurrency, zeroRefused["fetcher_concurrency"]))
	}
	if c.MaxPages < 0 {
		errs = append(errs, fmt.Errorf("max_pages %d: %s", c.MaxPages, zeroRefused["max_pages"]))
	}
	if c.MaxPagesPerHost < 0 {
		errs = append(errs, fmt.Errorf("max_pages_per_host %d: %s", c.MaxPagesPerHost, zeroRefused["max_pages_per_host"]))
	}
	if c.EmbedHops != nil && (*c.EmbedHops < 0 || *c.EmbedHops > MaxEmbedHops) {
		errs = append(errs, fmt.Errorf("embed_hops %d: must be between 0 (embeds in scope only) and %d", *c.EmbedHops, MaxEmbedHops))
	}
	if n, ok := c.DepthLimit(); ok && n < 0 {
		errs = append(errs, fmt.Errorf("max_depth %d: must be 0 (the seeds only) or more; leave it out for no limit", n))
	}
	if c.MaxDuration < 0 {
		errs = append(errs, fmt.Errorf("max_duration %s: %s", c.MaxDuration, zeroRefused["max_duration"]))
	}
	return errs
}

// checkHosts checks the politeness settings, the campaign's and each
// host rule's.
func (c Config) checkHosts() []error {
	var errs []error
	if c.PerHostConcurrency < 1 || c.PerHostConcurrency > 256 {
		errs = append(errs, fmt.Errorf("per_host_concurrency %d: %s", c.PerHostConcurrency, zeroRefused["per_host_concurrency"]))
	}
	if d := c.HostDelay(); d < 0 || d > time.Hour {
		errs = append(errs, fmt.Errorf("per_host_delay %s: must be between 0 (no delay) and 1h", d))
	}
	errs = append(errs, checkHostRules(c.Hosts)...)
	if c.DelayFactor < 0 || c.DelayFactor > 100 || math.IsNaN(c.DelayFactor) {
		errs = append(errs, fmt.Errorf("delay_factor %g: must be between 0 (off) and 100", c.DelayFactor))
	}
	errs = append(errs, c.checkPolitenessKey()...)
	errs = append(errs, c.checkRevisit()...)
	if err := c.Live.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkFetchLimits checks what bounds one fetch and its retries.
func (c Config) checkFetchLimits() []error {
	var errs []error
	if c.BodyCap != 0 && (c.BodyCap < 1024 || c.BodyCap > MaxBodyCap) {
		errs = append(errs, fmt.Errorf("body_cap %d: %s", c.BodyCap, zeroRefused["body_cap"]))
	}
	if n := c.RedirectLimit(); n < 0 || n > 30 {
		errs = append(errs, fmt.Errorf("max_redirects %d: must be between 0 (follow none) and 30", n))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 20 {
		errs = append(errs, fmt.Errorf("max_attempts %d: %s", c.MaxAttempts, zeroRefused["max_attempts"]))
	}
	if c.RestartAlert < 1 || c.RestartAlert > 1000 {
		errs = append(errs, fmt.Errorf("restart_alert %d: %s", c.RestartAlert, zeroRefused["restart_alert"]))
	}
	if n := c.HostRetryCount(); n < 0 || n > 20 {
		errs = append(errs, fmt.Errorf("host_retries %d: must be between 0 (the first failure decides) and 20", n))
	}
	if d := c.HostRetryBackoff(); d < 0 || d > time.Hour {
		errs = append(errs, fmt.Errorf("retry_backoff %s: must be between 0 (retry at once) and 1h", d))
	}
	if d := c.FailAfterDuration(); d < 10*time.Second || d > 24*time.Hour {
		errs = append(errs, fmt.Errorf("fail_after %s: must be between 10s and 24h", d))
	}
	return errs
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
// warc:DIR, postgres://...) by the table of sink kinds (sinkuri.Check)
// and refuses one that carries a password: credentials come from the
// worker's environment, never from the config.
func CheckSinkURI(s string) error { return sinkuri.Check(s) }

// Redact returns a URI with its password, in its user info or as a
// password= query parameter, replaced by ***, for messages and logs.
func Redact(s string) string { return sinkuri.Redact(s) }

// PolitenessFor returns the delay and concurrency for a host: what a
// HostRule for it sets, the campaign's values otherwise.
func (c Config) PolitenessFor(host string) (time.Duration, int) {
	d, n := c.HostDelay(), c.PerHostConcurrency
	if n == 0 {
		n = DefaultPerHostConcurrency
	}
	for _, h := range append(slices.Clone(c.Hosts), c.Live.Hosts...) {
		if strings.EqualFold(h.Host, host) {
			if h.Delay != nil {
				d = *h.Delay
			}
			if h.Concurrency != nil {
				n = *h.Concurrency
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

// checkSeedScores: every scored URL is a seed (a typo would score nothing),
// and every score is a finite number.
func (c Config) checkSeedScores() []error {
	var errs []error
	for _, u := range slices.Sorted(maps.Keys(c.SeedScores)) {
		switch v := c.SeedScores[u]; {
		case !slices.Contains(c.Seeds, u):
			errs = append(errs, fmt.Errorf("seed_scores %q: not one of the seeds", u))
		case math.IsNaN(v) || math.IsInf(v, 0):
			errs = append(errs, fmt.Errorf("seed_scores %q: %v: must be a finite number", u, v))
		}
	}
	return errs
}

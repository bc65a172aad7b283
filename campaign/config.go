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
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-crawl/drover/sink/sinkuri"
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

// HostRule overrides the campaign's politeness for one host. A nil field
// keeps the campaign's value; Delay 0 means no delay for this host.
type HostRule struct {
	Host        string         `json:"host" yaml:"host"`
	Delay       *time.Duration `json:"delay,omitempty" yaml:"delay,omitempty"`
	Concurrency *int           `json:"concurrency,omitempty" yaml:"concurrency,omitempty"`
	// BlockUntil: no request to the host starts before this time.
	BlockUntil *time.Time `json:"block_until,omitempty" yaml:"block_until,omitempty"`
}

// Config is a campaign's configuration; WithDefaults fills in what is unset
// and Validate checks the result.
//
// Zero is a value, unset is the default (the flags of `starter start` in
// docs/operating.md). The numbers come in two kinds:
//
//   - Pointers (MaxDepth, EmbedHops, PerHostDelay, MaxRedirects, HostRetries,
//     RetryBackoff, FailAfter, a HostRule's Delay and Concurrency): nil is
//     unset, and 0 is a value (max_depth 0: the seeds only; per_host_delay
//     0: no delay; max_redirects 0: no redirect followed; ...) or, where it
//     means nothing, refused by Validate. Read them through their accessors
//     (DepthLimit, HostDelay, RedirectLimit, HostRetryCount, ...).
//   - Plain numbers (Fetchers, FetcherConcurrency, MaxPages,
//     MaxPagesPerHost, MaxDuration, PerHostConcurrency, BodyCap,
//     MaxAttempts, RestartAlert): 0 is not a value of any of them, so 0
//     in a Config means unset. An input that gives one of them as 0
//     explicitly (a flag, a YAML key) is refused by its reader with
//     ZeroRefused's rule, rather than silently taking the default. They stay
//     plain because the workflow, the activities and the scheduler read
//     them as numbers.
//
// The config is the workflow's JSON input: a pointer field encodes as a
// plain number, so inputs written before the pointers decode as they were.
type Config struct {
	ID string `json:"id" yaml:"id"`
	// Live are the rules added while the campaign runs (Rules); the
	// workflow sets them, a start never does.
	Live Rules `json:"live,omitempty" yaml:"-"`
	// Run names one run of the campaign ID in the frontier: its queues,
	// seen marks, failure records and scheduler state live under
	// FrontierKey (ID~Run), so the runs of one ID never see each other's.
	// The workflow sets it on its first run (a continue-as-new carries it);
	// empty, the key is the ID (campaigns started before runs had names).
	Run string `json:"run,omitempty" yaml:"-"`
	// From names the lineage whose fetch history this run reads (a
	// campaign ID, most often the first run's): a URL fetched before is
	// asked for with its validators (If-None-Match, If-Modified-Since),
	// and a page found unchanged (304, or the same payload digest) is
	// stored as a revisit of the earlier capture, its links taken from
	// the history. Empty: every URL is fetched in full. See HistoryKey.
	From string `json:"from,omitempty" yaml:"from,omitempty"`
	// NoHistory keeps no fetch history: a later run cannot read this
	// one's. Otherwise every page's validators, payload digest, capture
	// date and links are kept under HistoryKey, by the schedulers.
	NoHistory bool `json:"no_history,omitempty" yaml:"no_history,omitempty"`
	// Revisit makes the campaign continuous: a URL that a rule matches is
	// fetched again at its next-fetch time (RevisitRule.Next), and the
	// campaign does not end when its frontier drains, only when stopped
	// (or at MaxDuration, MaxPages). Empty: each URL is fetched once.
	Revisit []RevisitRule `json:"revisit,omitempty" yaml:"revisit,omitempty"`
	// Seeds are the URLs the campaign starts from, carried in the
	// workflow's input: a few. A long list is streamed to the schedulers
	// from a file instead (SeedsFile), and never rides in the config.
	Seeds []string `json:"seeds" yaml:"seeds"`
	// SeedsFile names where the starter streamed the campaign's seeds from
	// (`start --seeds-file`: a path, "-" or a URL), as a record; the seeds
	// themselves are in the frontier, not here.
	SeedsFile string `json:"seeds_file,omitempty" yaml:"seeds_file,omitempty"`
	// SeedHosts are the hosts (HostKey) of the seeds streamed from
	// SeedsFile: with Seeds' hosts, the scope when Scope is empty. At most
	// MaxSeedHosts, since the config rides in every activity's input.
	SeedHosts []string `json:"seed_hosts,omitempty" yaml:"-"`
	// SeedScores gives seeds a score, which the "score" priority policy
	// leases highest first and their links inherit by default; a seed not
	// named here has 0. Every key must be one of Seeds.
	SeedScores map[string]float64 `json:"seed_scores,omitempty" yaml:"seed_scores,omitempty"`
	// Scope: a URL is in scope when it matches any of these regexes; without
	// one, the seeds' hosts are the scope.
	Scope   []string `json:"scope,omitempty" yaml:"scope,omitempty"`
	Exclude []string `json:"exclude,omitempty" yaml:"exclude,omitempty"`

	Fetchers int `json:"fetchers" yaml:"fetchers"`
	// FetcherConcurrency is how many URLs one FetchSession works on at once
	// (the credit it offers its scheduler).
	FetcherConcurrency int `json:"fetcher_concurrency,omitempty" yaml:"fetcher_concurrency,omitempty"`

	// MaxPages ends the campaign (completed) after this many pages; 0:
	// no limit.
	MaxPages int64 `json:"max_pages,omitempty" yaml:"max_pages,omitempty"`
	// MaxPagesPerHost: at most this many pages of one host; 0: no limit.
	MaxPagesPerHost int64 `json:"max_pages_per_host,omitempty" yaml:"max_pages_per_host,omitempty"`
	// MaxDepth is the most links from a seed: nil no limit (trap guards
	// still apply), 0 the seeds only. See DepthLimit.
	MaxDepth *int `json:"max_depth,omitempty" yaml:"max_depth,omitempty"`
	// NoEmbeds leaves a page's assets (images, stylesheets, scripts, ...)
	// unfetched: only the pages it links to are followed. Off by default,
	// so that an archive of the crawl replays (EmbedHops).
	NoEmbeds bool `json:"no_embeds,omitempty" yaml:"no_embeds,omitempty"`
	// EmbedHops is how many embeds in a row may leave the scope: an image
	// on a CDN host (1), the font its stylesheet loads (2). Embeds in scope
	// are always fetched; nothing but embeds is ever followed out of scope.
	// nil: DefaultEmbedHops; 0: embeds in scope only. See EmbedLimit.
	EmbedHops *int `json:"embed_hops,omitempty" yaml:"embed_hops,omitempty"`
	// MaxDuration ends the campaign (completed) after this long; 0: no
	// limit.
	MaxDuration time.Duration `json:"max_duration,omitempty" yaml:"max_duration,omitempty"`

	PerHostConcurrency int `json:"per_host_concurrency" yaml:"per_host_concurrency"`
	// PerHostDelay is the time between request starts to one host: nil
	// DefaultPerHostDelay, 0 none. See HostDelay.
	PerHostDelay *time.Duration `json:"per_host_delay,omitempty" yaml:"per_host_delay,omitempty"`
	Hosts        []HostRule     `json:"hosts,omitempty" yaml:"hosts,omitempty"`
	// DelayFactor adapts a host's delay to the server: its requests start
	// at least DelayFactor times its last response time apart (Heritrix's
	// delayFactor, Scrapy's AutoThrottle), and never less than its
	// delay; at most MaxAdaptiveDelay. 0: off.
	DelayFactor float64 `json:"delay_factor,omitempty" yaml:"delay_factor,omitempty"`
	// PolitenessKey is what the delay counts per, on the clocks a
	// scheduler's campaigns share (ClockKey): "host" (or empty, the
	// default), "domain" (the registered domain, by the public suffix
	// list), "group" (PolitenessGroups) or "ip" (the address the fetcher
	// dialed, shared by the schedulers: see docs/design.md). A campaign's
	// URLs go to the shard of their key (of their host name under "ip"),
	// so it is fixed for the campaign's life.
	PolitenessKey string `json:"politeness_key,omitempty" yaml:"politeness_key,omitempty"`
	// PolitenessGroups maps a host name or a registered domain to a group
	// name, for PolitenessKey "group": the hosts of a group, in every
	// campaign that names it, share one clock.
	PolitenessGroups map[string]string `json:"politeness_groups,omitempty" yaml:"politeness_groups,omitempty"`

	// QueueType is the type of the campaign's shard queues: "quorum"
	// (replicated over a RabbitMQ cluster's nodes, outliving the loss of
	// a minority of them) or "classic" (on one node, cheaper); empty
	// takes the scheduler's default (quorum when its AMQP_URL names
	// several nodes, else classic). A campaign keeps the type its queues
	// were declared with.
	QueueType string `json:"queue_type,omitempty" yaml:"queue_type,omitempty"`

	Priority   string   `json:"priority" yaml:"priority"`
	UserAgent  string   `json:"user_agent" yaml:"user_agent"`
	Sitemaps   bool     `json:"sitemaps,omitempty" yaml:"sitemaps,omitempty"`
	DropParams []string `json:"drop_params,omitempty" yaml:"drop_params,omitempty"`
	NotifyURL  string   `json:"notify_url,omitempty" yaml:"notify_url,omitempty"`
	Sinks      []string `json:"sinks" yaml:"sinks"`
	// CrawlLog is the directory of the crawl log: every worker writes one
	// JSON line per fetch attempt to its own file in CrawlLog/FRONTIER-KEY/
	// (package crawllog). A path on the workers' machines (relative: to
	// each worker's working directory); empty: no crawl log.
	CrawlLog string `json:"crawl_log,omitempty" yaml:"crawl_log,omitempty"`
	// CrawlLogTopic is a Kafka topic (kafka://HOST:PORT/TOPIC, options
	// and credentials as a sink's) that the workers also write every line
	// of the crawl log to, keyed by URL, instead of or beside CrawlLog's
	// files; the schedulers' lines go to the files only. Empty: none.
	CrawlLogTopic string `json:"crawl_log_topic,omitempty" yaml:"crawl_log_topic,omitempty"`

	AllowPrivate bool `json:"allow_private,omitempty" yaml:"allow_private,omitempty"`
	// AllowAddrs lists exact IP addresses the address guard lets through even
	// when AllowPrivate is off (tests use it for their own server).
	AllowAddrs []string `json:"allow_addrs,omitempty" yaml:"allow_addrs,omitempty"`

	// BodyCap is the most bytes of one body fetched; a longer body is
	// cut there and recorded as truncated. 0: no cap (a body larger than
	// the fetcher's in-memory threshold is spooled to disk as it
	// arrives). Inputs written before no cap was the default carry the
	// old default, 1 MiB, and keep it.
	BodyCap int64 `json:"body_cap,omitempty" yaml:"body_cap,omitempty"`
	// MaxRedirects is the most redirect hops followed from a URL: nil
	// DefaultMaxRedirects, 0 none (the redirect is recorded as a page, its
	// target dropped). See RedirectLimit.
	MaxRedirects *int `json:"max_redirects,omitempty" yaml:"max_redirects,omitempty"`
	MaxAttempts  int  `json:"max_attempts,omitempty" yaml:"max_attempts,omitempty"`

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
	// further retry waits twice as long (at most 10 min), ±50% jitter. nil:
	// DefaultRetryBackoff.
	RetryBackoff *time.Duration `json:"retry_backoff,omitempty" yaml:"retry_backoff,omitempty"`
	// FailAfter: a campaign whose every fetcher keeps failing, with no
	// page fetched, for this long ends as failed with the fetchers' reason.
	// nil: DefaultFailAfter.
	FailAfter *time.Duration `json:"fail_after,omitempty" yaml:"fail_after,omitempty"`
}

// Defaults of `starter start`'s flags (docs/operating.md, "Starting and
// steering a campaign").
const (
	DefaultFetchers           = 4
	DefaultFetcherConcurrency = 32
	DefaultPerHostConcurrency = 1
	DefaultPerHostDelay       = time.Second
	DefaultPriority           = "bfs"
	// MaxBodyCap is the largest body_cap.
	MaxBodyCap          = 1 << 40
	DefaultMaxRedirects = 10
	DefaultMaxAttempts  = 3
	DefaultRestartAlert = 5
	DefaultHostRetries  = 2
	// DefaultEmbedHops is Heritrix's default for the same rule
	// (TransclusionDecideRule's maxTransHops).
	DefaultEmbedHops    = 2
	DefaultRetryBackoff = 15 * time.Second
	DefaultFailAfter    = 5 * time.Minute
	// DefaultSink is the topic drover.pages on the worker's KAFKA_BROKERS.
	DefaultSink = "kafka:///drover.pages"
	MaxFetchers = 1024
)

// WithDefaults returns c with every unset field set to its default
// (MaxDepth stays nil: no limit). It is idempotent. The pointers it sets are
// new; those c already had are shared with the result.
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
	if c.PerHostDelay == nil {
		c.PerHostDelay = ptr(DefaultPerHostDelay)
	}
	if c.Priority == "" {
		c.Priority = DefaultPriority
	}
	if c.UserAgent == "" {
		c.UserAgent = DefaultUserAgent
	}
	if c.MaxRedirects == nil {
		c.MaxRedirects = ptr(DefaultMaxRedirects)
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
	if c.EmbedHops == nil {
		c.EmbedHops = ptr(DefaultEmbedHops)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// DepthLimit is the most links from a seed a URL may be (0: the seeds only);
// ok is false when there is no limit.
func (c Config) DepthLimit() (n int, ok bool) {
	if c.MaxDepth == nil {
		return 0, false
	}
	return *c.MaxDepth, true
}

// HostDelay is PerHostDelay, or its default when unset; 0 is no delay.
func (c Config) HostDelay() time.Duration {
	if c.PerHostDelay == nil {
		return DefaultPerHostDelay
	}
	return *c.PerHostDelay
}

// RedirectLimit is MaxRedirects, or its default when unset; 0 follows no
// redirect.
func (c Config) RedirectLimit() int {
	if c.MaxRedirects == nil {
		return DefaultMaxRedirects
	}
	return *c.MaxRedirects
}

// EmbedLimit is how many embeds in a row may leave the scope: EmbedHops,
// or its default when unset; -1 when the campaign fetches no embeds.
func (c Config) EmbedLimit() int {
	switch {
	case c.NoEmbeds:
		return -1
	case c.EmbedHops == nil:
		return DefaultEmbedHops
	}
	return *c.EmbedHops
}

// MaxEmbedHops bounds EmbedHops: a chain of assets longer than this is a
// trap, not a page's rendering.
const MaxEmbedHops = 5

// MaxSeedHosts and MaxSeedHostBytes (their names' bytes together) bound
// SeedHosts: the config rides in every activity's input, each history
// event of which must stay well under 64 KB. A campaign streamed from a
// list whose seeds are on more hosts needs scope regexes.
const (
	MaxSeedHosts     = 1000
	MaxSeedHostBytes = 32 << 10
)

// SeedHostBytes is the bytes of SeedHosts' names together.
func (c Config) SeedHostBytes() int {
	n := 0
	for _, h := range c.SeedHosts {
		n += len(h)
	}
	return n
}

// MaxInlineSeeds bounds the seeds a campaign's config carries (Seeds): the
// starter streams a longer list, as it does a seeds file.
const MaxInlineSeeds = 100

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

// zeroRefused holds the rule of each plain number field, by its key: 0 is
// not a value of any of them (see Config), so Validate and ZeroRefused state
// the same range.
var zeroRefused = map[string]string{
	"fetchers":             fmt.Sprintf("must be between 1 and %d (`starter scale ID 0` idles a running campaign)", MaxFetchers),
	"fetcher_concurrency":  "must be between 1 and 1024",
	"max_pages":            "must be 1 or more; leave it out for no limit",
	"max_pages_per_host":   "must be 1 or more; leave it out for no limit",
	"max_duration":         "must be more than 0; leave it out for no limit",
	"per_host_concurrency": "must be between 1 and 256",
	"body_cap":             fmt.Sprintf("must be between 1024 and %d bytes; leave it out for no cap", int64(MaxBodyCap)),
	"max_attempts":         "must be between 1 and 20",
	"restart_alert":        "must be between 1 and 1000",
}

// ZeroRefused tells whether key (a field's JSON/YAML key, such as
// "max_pages") is a plain number field, whose 0 is not a value and in a
// Config means unset, and gives its rule. Readers of an input that can tell
// an explicit 0 from a missing key (flags, YAML) refuse such a 0 with
// "KEY 0: RULE" rather than silently taking the default.
func ZeroRefused(key string) (rule string, refused bool) {
	rule, refused = zeroRefused[key]
	return rule, refused
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// runPattern is the form of Config.Run.
var runPattern = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// RunSep joins a campaign ID and its run in a frontier key; no ID holds it.
const RunSep = "~"

// FrontierKey names this run of the campaign in the frontier: the ID, and
// the run when there is one (ID~Run). Queue names, seen marks, failure
// records and the schedulers' campaign state all use it.
func (c Config) FrontierKey() string {
	if c.Run == "" {
		return c.ID
	}
	return c.ID + RunSep + c.Run
}

// HistoryKey names the lineage whose fetch history this run reads (when
// From is set) and writes (unless NoHistory): From, or else the ID. So
// runs started with --from news all read and extend the history of news,
// and a run without it starts the lineage of its own ID.
func (c Config) HistoryKey() string {
	if c.From != "" {
		return c.From
	}
	return c.ID
}

// NewRun names a run that starts at t, with random bits told apart from
// another run started in the same millisecond: the time in base 36 (9
// digits, enough for 3,000 years), then 4 random ones. The runs of one ID
// sort in the order they started (RunAfter).
func NewRun(t time.Time, random uint64) string {
	const digits = 9
	ts := strconv.FormatInt(max(t.UnixMilli(), 0), 36)
	r := strconv.FormatUint(random%(36*36*36*36), 36)
	return strings.Repeat("0", max(digits-len(ts), 0)) + ts + strings.Repeat("0", 4-len(r)) + r
}

// RunAfter reports whether frontier key a names a later run of its
// campaign than key b: a key without a run (a campaign started before
// runs had names) comes before every run.
func RunAfter(a, b string) bool {
	_, ra, _ := strings.Cut(a, RunSep)
	_, rb, _ := strings.Cut(b, RunSep)
	return ra > rb
}

func (c Config) validRun() error {
	if c.Run != "" && !runPattern.MatchString(c.Run) {
		return fmt.Errorf("run %q: must be 1-16 lower-case letters or digits (the workflow names its run; leave it out)", c.Run)
	}
	return nil
}

// KeyID is the campaign ID of a frontier key (FrontierKey).
func KeyID(key string) string {
	id, _, _ := strings.Cut(key, RunSep)
	return id
}

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

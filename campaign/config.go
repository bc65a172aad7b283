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
	"fmt"
	"regexp"
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
	// Dedup stores a page whose payload another URL of the lineage
	// already stored as a revisit of that capture (identical-payload-digest,
	// refers-to that URL and date), not as a second copy. The schedulers
	// keep a digest index in the lineage's history, one entry per payload
	// stored in full; the fetcher asks the scheduler that leased the URL
	// before it stores. A body is compared with the captures of the hosts
	// that scheduler holds (with one scheduler, every host). Needs the
	// history (not NoHistory).
	Dedup bool `json:"dedup,omitempty" yaml:"dedup,omitempty"`
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

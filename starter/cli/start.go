package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/temporal"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/workflows"
)

// startFlags are the flags of `starter start`, bound before parsing; only
// those given on the command line override the -f file.
type startFlags struct {
	file        string
	wait        bool
	json        bool
	noPreflight bool
	stdin       io.Reader // --seeds-file -
	cfg         campaign.Config
	// The flags of the config's pointer fields (nil: unset), which set them
	// only when given.
	maxDepth, hostRetries, embedHops      int
	perHostDelay, retryBackoff, failAfter time.Duration
	revisit                               []string
}

func (a *App) startCommand() *cobra.Command {
	var f startFlags
	cmd := &cobra.Command{
		Use:   "start --id ID --seed URL [flags]",
		Short: "Start a crawl campaign",
		Long: `Start a crawl campaign: a Campaign workflow whose ID is the campaign ID.

Flags given on the command line override the -f file; repeatable flags
(--seed, --scope, --exclude, --drop-param, --sink) replace the file's list.
With --wait, starter blocks until the campaign ends and exits 0 when it
completed (also when --max-pages or --max-duration ended it), 1 when it
failed or was stopped, 2 on a usage error.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, zeros, err := buildConfig(cmd.Flags(), f)
			if err != nil {
				return err
			}
			f.stdin = cmd.InOrStdin()
			return a.start(cmd.Context(), cfg, zeros, f)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	c := &f.cfg
	fl.StringVar(&c.ID, "id", "", "campaign ID, also the workflow ID (required, here or in -f)")
	fl.StringArrayVar(&c.Seeds, "seed", nil, "seed URL (repeatable; required, here, in -f or as --seeds-file)")
	fl.StringVar(&c.SeedsFile, "seeds-file", "", "a list of seeds, one URL a line: a path (plain or gzip), - for standard input, or an http(s) URL; streamed to the schedulers, never put in the workflow's input")
	fl.StringVar(&c.From, "from", "", "crawl again: read the fetch history of this campaign ID (its lineage), ask with validators, store unchanged pages as revisits")
	fl.BoolVar(&c.NoHistory, "no-history", false, "keep no fetch history: a later --from run cannot read this one")
	fl.BoolVar(&c.Dedup, "dedup", false, "store a page whose payload another URL already stored as a revisit of that capture (identical-payload-digest), not a second copy")
	fl.StringArrayVar(&f.revisit, "revisit", nil, "crawl continuously: fetch the URLs this rule fits again, min=10m,max=7d,factor=2[,mime=text/html][,depth=0][,match=REGEX] (repeatable, first fit wins; the campaign then runs until stopped)")
	fl.StringArrayVar(&c.Scope, "scope", nil, "a URL is in scope when it matches any of these regexes (repeatable; default: the seeds' hosts)")
	fl.StringArrayVar(&c.Exclude, "exclude", nil, "skip URLs matching this regex (repeatable)")
	fl.IntVar(&c.Fetchers, "fetchers", campaign.DefaultFetchers, "number of concurrent fetchers (1-1024)")
	fl.Int64Var(&c.MaxPages, "max-pages", 0, "end the campaign after this many pages (default: no limit)")
	fl.Int64Var(&c.MaxPagesPerHost, "max-pages-per-host", 0, "at most this many pages per host (default: no limit)")
	fl.IntVar(&f.maxDepth, "max-depth", 0, "at most this many links from a seed, 0 the seeds only (default: no limit; trap guards still apply)")
	fl.BoolVar(&c.NoEmbeds, "no-embeds", false, "fetch no page assets (images, stylesheets, scripts, ...), only the pages linked")
	fl.IntVar(&f.embedHops, "embed-hops", campaign.DefaultEmbedHops, fmt.Sprintf("assets in a row that may leave the scope, as an image on a CDN host (0: assets in scope only; at most %d)", campaign.MaxEmbedHops))
	fl.DurationVar(&c.MaxDuration, "max-duration", 0, "end the campaign after this long, e.g. 30m (default: no limit)")
	fl.IntVar(&c.PerHostConcurrency, "per-host-concurrency", campaign.DefaultPerHostConcurrency, "requests at a time per host (1-256)")
	fl.DurationVar(&f.perHostDelay, "per-host-delay", campaign.DefaultPerHostDelay, "time between request starts per host, 0 for none (robots.txt Crawl-delay wins when larger)")
	fl.Float64Var(&c.DelayFactor, "delay-factor", 0, "space a host's requests by this many times its last response time, at least --per-host-delay and at most 1m (0: off)")
	fl.StringVar(&c.PolitenessKey, "politeness-key", "", "what the delay counts per, shared with the other campaigns on the same key: host, domain (the registered domain), group (--politeness-group) or ip (the address the fetcher dialed) (default host)")
	fl.StringToStringVar(&c.PolitenessGroups, "politeness-group", nil, "HOST=GROUP or DOMAIN=GROUP: with --politeness-key group, the hosts of a group share one delay (repeatable)")
	fl.IntVar(&f.hostRetries, "host-retries", campaign.DefaultHostRetries, "retries of a host whose connections fail before it is failed for the campaign (0: the first failure decides)")
	fl.DurationVar(&f.retryBackoff, "retry-backoff", campaign.DefaultRetryBackoff, "wait before a failing host's first retry; each further one waits twice as long, ±50% jitter (0: at once)")
	fl.DurationVar(&f.failAfter, "fail-after", campaign.DefaultFailAfter, "end the campaign as failed after this long with every fetcher failing and no page fetched (10s-24h)")
	fl.StringVar(&c.Priority, "priority", campaign.DefaultPriority, "priority policy: bfs, score or fair")
	fl.StringVar(&c.QueueType, "queue-type", "", "shard queues: quorum (replicated over a RabbitMQ cluster) or classic (one node) (default: the scheduler's, quorum when its AMQP_URL names several nodes)")
	fl.StringVar(&c.UserAgent, "user-agent", campaign.DefaultUserAgent, "User-Agent header")
	fl.BoolVar(&c.Sitemaps, "sitemaps", false, "also seed from the hosts' sitemaps")
	fl.StringArrayVar(&c.DropParams, "drop-param", nil, "query parameter to drop when normalizing URLs (repeatable)")
	fl.StringVar(&c.NotifyURL, "notify-url", "", "URL to POST exception notifications and the campaign's end to")
	fl.StringArrayVar(&c.Sinks, "sink", nil, "where pages go: kafka://HOST:PORT/TOPIC, warc:DIR or postgres://... (repeatable; default "+campaign.DefaultSink+")")
	fl.StringVar(&c.CrawlLog, "crawl-log", "", "directory of the crawl log: each worker writes a JSON line per fetch attempt to its file in DIR/ID~RUN/ (default: none)")
	fl.StringVar(&c.CrawlLogTopic, "crawl-log-topic", "", "also write the workers' crawl log lines to this Kafka topic: kafka://HOST:PORT/TOPIC (default: none)")
	fl.BoolVar(&c.AllowPrivate, "allow-private", false, "fetch loopback, private and link-local addresses too")
	fl.StringVarP(&f.file, "file", "f", "", "campaign config as YAML (campaign.yaml)")
	fl.BoolVar(&f.noPreflight, "no-preflight", false, "start without checking from here that a scheduler answers and the sinks take pages")
	fl.BoolVar(&f.wait, "wait", false, "block until the campaign ends, showing progress")
	fl.BoolVar(&f.json, "json", false, "print the start result (with --wait: the final status) as JSON")
	return cmd
}

// buildConfig reads the -f file, if any, then lays the flags that were given
// over it. The result is not yet defaulted or validated. zeros are the plain
// number fields that the file or a flag gave as 0, where 0 is not a value
// (campaign.ZeroRefused): in the config they would silently be the default.
func buildConfig(fl *pflag.FlagSet, f startFlags) (cfg campaign.Config, zeros []error, err error) {
	if f.file != "" {
		if cfg, zeros, err = readConfigFile(f.file); err != nil {
			return cfg, nil, err
		}
	}
	c := f.cfg
	set := map[string]func(){
		"id":                   func() { cfg.ID = c.ID },
		"seed":                 func() { cfg.Seeds = c.Seeds },
		"seeds-file":           func() { cfg.SeedsFile = c.SeedsFile },
		"from":                 func() { cfg.From = c.From },
		"queue-type":           func() { cfg.QueueType = c.QueueType },
		"no-history":           func() { cfg.NoHistory = c.NoHistory },
		"dedup":                func() { cfg.Dedup = c.Dedup },
		"scope":                func() { cfg.Scope = c.Scope },
		"exclude":              func() { cfg.Exclude = c.Exclude },
		"fetchers":             func() { cfg.Fetchers = c.Fetchers },
		"max-pages":            func() { cfg.MaxPages = c.MaxPages },
		"max-pages-per-host":   func() { cfg.MaxPagesPerHost = c.MaxPagesPerHost },
		"max-depth":            func() { cfg.MaxDepth = new(f.maxDepth) },
		"no-embeds":            func() { cfg.NoEmbeds = c.NoEmbeds },
		"embed-hops":           func() { cfg.EmbedHops = new(f.embedHops) },
		"max-duration":         func() { cfg.MaxDuration = c.MaxDuration },
		"per-host-concurrency": func() { cfg.PerHostConcurrency = c.PerHostConcurrency },
		"per-host-delay":       func() { cfg.PerHostDelay = new(f.perHostDelay) },
		"host-retries":         func() { cfg.HostRetries = new(f.hostRetries) },
		"delay-factor":         func() { cfg.DelayFactor = c.DelayFactor },
		"politeness-key":       func() { cfg.PolitenessKey = c.PolitenessKey },
		"politeness-group":     func() { cfg.PolitenessGroups = c.PolitenessGroups },
		"retry-backoff":        func() { cfg.RetryBackoff = new(f.retryBackoff) },
		"fail-after":           func() { cfg.FailAfter = new(f.failAfter) },
		"priority":             func() { cfg.Priority = c.Priority },
		"user-agent":           func() { cfg.UserAgent = c.UserAgent },
		"sitemaps":             func() { cfg.Sitemaps = c.Sitemaps },
		"drop-param":           func() { cfg.DropParams = c.DropParams },
		"notify-url":           func() { cfg.NotifyURL = c.NotifyURL },
		"sink":                 func() { cfg.Sinks = c.Sinks },
		"crawl-log":            func() { cfg.CrawlLog = c.CrawlLog },
		"crawl-log-topic":      func() { cfg.CrawlLogTopic = c.CrawlLogTopic },
		"allow-private":        func() { cfg.AllowPrivate = c.AllowPrivate },
	}
	fl.Visit(func(fl *pflag.Flag) {
		apply, ok := set[fl.Name]
		if !ok {
			return
		}
		apply()
		key := strings.ReplaceAll(fl.Name, "-", "_")
		if rule, refused := campaign.ZeroRefused(key); refused && isZero(fl.Value.String()) {
			zeros = append(zeros, fmt.Errorf("%s 0: %s", key, rule))
		}
	})
	if fl.Changed("revisit") {
		cfg.Revisit = nil
		for _, r := range f.revisit {
			rule, err := campaign.ParseRevisitRule(r)
			if err != nil {
				return cfg, nil, usagef("--revisit: %v", err)
			}
			cfg.Revisit = append(cfg.Revisit, rule)
		}
	}
	switch {
	case cfg.ID == "":
		return cfg, nil, usagef("required flag --id not set (nor id: in a -f file)")
	case len(cfg.Seeds) == 0 && cfg.SeedsFile == "":
		return cfg, nil, usagef("required flag --seed not set (nor --seeds-file, nor seeds: or seeds_file: in a -f file)")
	}
	return cfg, zeros, nil
}

// startResult is `start --json`'s output without --wait.
type startResult struct {
	ID      string          `json:"id"`
	RunID   string          `json:"run_id"`
	State   string          `json:"state"`
	WebUI   string          `json:"web_ui"`
	Summary string          `json:"summary"`
	Config  campaign.Config `json:"config"`
}

func (a *App) start(ctx context.Context, cfg campaign.Config, zeros []error, f startFlags) error {
	wait, asJSON := f.wait, f.json
	cfg = cfg.WithDefaults()
	if err := errors.Join(append(zeros, cfg.Validate())...); err != nil {
		// Validate's messages name the field and its range: print them as
		// they are, one per line.
		fmt.Fprintln(a.Err, err)
		return &exitError{code: ExitUsage}
	}
	if a.Preflight != nil && !f.noPreflight {
		if err := a.Preflight(ctx, a.Env, cfg); err != nil {
			// One problem a line, each naming what to fix.
			fmt.Fprintf(a.Err, "campaign %s not started:\n  %s\n", cfg.ID, strings.ReplaceAll(err.Error(), "\n", "\n  "))
			return &exitError{code: ExitFailure}
		}
	}
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	if streamsSeeds(cfg) {
		if cfg, err = a.startSeeds(ctx, c, cfg, f.stdin); err != nil {
			return err
		}
	}
	summary := Summary(cfg)
	runID, err := c.Start(ctx, StartRequest{
		ID:        cfg.ID,
		TaskQueue: workflows.TaskQueue,
		Workflow:  workflows.WorkflowName,
		Input:     workflowInput(cfg),
		Summary:   summary,
		Details:   Details(cfg),
		SearchAttributes: temporal.NewSearchAttributes(
			workflows.CampaignStateKey.ValueSet(campaign.StateRunning),
			workflows.PagesFetchedKey.ValueSet(0),
		),
	})
	if errors.Is(err, ErrAlreadyStarted) {
		started := ""
		if ex, derr := c.Describe(ctx, cfg.ID); derr == nil && !ex.StartTime.IsZero() {
			started = fmt.Sprintf(" (started %s)", ex.StartTime.Local().Format("2006-01-02 15:04:05 MST"))
		}
		return failf("campaign %s is already running%s; stop it first or pick another --id", cfg.ID, started)
	}
	if err != nil {
		return failf("cannot start campaign %s: %v", cfg.ID, err)
	}
	link := a.Env.WorkflowURL(cfg.ID)
	if !wait || !asJSON {
		if asJSON {
			return writeJSON(a.Out, startResult{ID: cfg.ID, RunID: runID, State: campaign.StateRunning,
				WebUI: link, Summary: summary, Config: cfg})
		}
		fmt.Fprintf(a.Out, "started campaign %s: %s\n  Web UI: %s\n", cfg.ID, summary, a.Env.webUILink(cfg.ID))
		if !wait {
			fmt.Fprintf(a.Out, "  follow it with: starter status %s --watch\n", cfg.ID)
			return nil
		}
	}
	return a.wait(ctx, cfg.ID, asJSON)
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// since formats an age for humans.
func since(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s ago"
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds ago", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm ago", int(d.Hours()), int(d.Minutes())%60)
}

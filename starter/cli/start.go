package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.temporal.io/sdk/temporal"
	"gopkg.in/yaml.v3"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/workflows"
)

// startFlags are the flags of `starter start`, bound before parsing; only
// those given on the command line override the -f file.
type startFlags struct {
	file string
	wait bool
	json bool
	cfg  campaign.Config
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
			cfg, err := buildConfig(cmd.Flags(), f)
			if err != nil {
				return err
			}
			return a.start(cmd.Context(), cfg, f.wait, f.json)
		},
	}
	fl := cmd.Flags()
	fl.SortFlags = false
	c := &f.cfg
	fl.StringVar(&c.ID, "id", "", "campaign ID, also the workflow ID (required, here or in -f)")
	fl.StringArrayVar(&c.Seeds, "seed", nil, "seed URL (repeatable; required, here or in -f)")
	fl.StringArrayVar(&c.Scope, "scope", nil, "a URL is in scope when it matches any of these regexes (repeatable; default: the seeds' hosts)")
	fl.StringArrayVar(&c.Exclude, "exclude", nil, "skip URLs matching this regex (repeatable)")
	fl.IntVar(&c.Fetchers, "fetchers", campaign.DefaultFetchers, "number of concurrent fetchers")
	fl.Int64Var(&c.MaxPages, "max-pages", 0, "stop after this many pages (0: no limit)")
	fl.Int64Var(&c.MaxPagesPerHost, "max-pages-per-host", 0, "at most this many pages per host (0: no limit)")
	fl.IntVar(&c.MaxDepth, "max-depth", 0, "at most this many links from a seed (0: no limit; trap guards still apply)")
	fl.DurationVar(&c.MaxDuration, "max-duration", 0, "stop after this long, e.g. 30m (0: no limit)")
	fl.IntVar(&c.PerHostConcurrency, "per-host-concurrency", campaign.DefaultPerHostConcurrency, "requests at a time per host")
	fl.DurationVar(&c.PerHostDelay, "per-host-delay", campaign.DefaultPerHostDelay, "time between request starts per host (robots.txt Crawl-delay wins when larger)")
	fl.StringVar(&c.Priority, "priority", campaign.DefaultPriority, "priority policy: bfs, score or fair")
	fl.StringVar(&c.UserAgent, "user-agent", campaign.DefaultUserAgent, "User-Agent header")
	fl.BoolVar(&c.Sitemaps, "sitemaps", false, "also seed from the hosts' sitemaps")
	fl.StringArrayVar(&c.DropParams, "drop-param", nil, "query parameter to drop when normalizing URLs (repeatable)")
	fl.StringVar(&c.NotifyURL, "notify-url", "", "URL to POST exception notifications and the campaign's end to")
	fl.StringArrayVar(&c.Sinks, "sink", nil, "where pages go: kafka://HOST:PORT/TOPIC, warc:DIR or postgres://... (repeatable; default "+campaign.DefaultSink+")")
	fl.BoolVar(&c.AllowPrivate, "allow-private", false, "fetch loopback, private and link-local addresses too")
	fl.StringVarP(&f.file, "file", "f", "", "campaign config as YAML (campaign.yaml)")
	fl.BoolVar(&f.wait, "wait", false, "block until the campaign ends, showing progress")
	fl.BoolVar(&f.json, "json", false, "print the start result (with --wait: the final status) as JSON")
	return cmd
}

// buildConfig reads the -f file, if any, then lays the flags that were given
// over it. The result is not yet defaulted or validated.
func buildConfig(fl *pflag.FlagSet, f startFlags) (campaign.Config, error) {
	var cfg campaign.Config
	if f.file != "" {
		var err error
		if cfg, err = readConfigFile(f.file); err != nil {
			return cfg, err
		}
	}
	c := f.cfg
	set := map[string]func(){
		"id":                   func() { cfg.ID = c.ID },
		"seed":                 func() { cfg.Seeds = c.Seeds },
		"scope":                func() { cfg.Scope = c.Scope },
		"exclude":              func() { cfg.Exclude = c.Exclude },
		"fetchers":             func() { cfg.Fetchers = c.Fetchers },
		"max-pages":            func() { cfg.MaxPages = c.MaxPages },
		"max-pages-per-host":   func() { cfg.MaxPagesPerHost = c.MaxPagesPerHost },
		"max-depth":            func() { cfg.MaxDepth = c.MaxDepth },
		"max-duration":         func() { cfg.MaxDuration = c.MaxDuration },
		"per-host-concurrency": func() { cfg.PerHostConcurrency = c.PerHostConcurrency },
		"per-host-delay":       func() { cfg.PerHostDelay = c.PerHostDelay },
		"priority":             func() { cfg.Priority = c.Priority },
		"user-agent":           func() { cfg.UserAgent = c.UserAgent },
		"sitemaps":             func() { cfg.Sitemaps = c.Sitemaps },
		"drop-param":           func() { cfg.DropParams = c.DropParams },
		"notify-url":           func() { cfg.NotifyURL = c.NotifyURL },
		"sink":                 func() { cfg.Sinks = c.Sinks },
		"allow-private":        func() { cfg.AllowPrivate = c.AllowPrivate },
	}
	fl.Visit(func(fl *pflag.Flag) {
		if apply, ok := set[fl.Name]; ok {
			apply()
		}
	})
	switch {
	case cfg.ID == "":
		return cfg, usagef("required flag --id not set (nor id: in a -f file)")
	case len(cfg.Seeds) == 0:
		return cfg, usagef("required flag --seed not set (nor seeds: in a -f file)")
	}
	return cfg, nil
}

// readConfigFile reads a YAML campaign.Config; an unknown key is an error,
// so that a typo does not silently crawl with a default.
func readConfigFile(path string) (campaign.Config, error) {
	var cfg campaign.Config
	file, err := os.Open(path)
	if err != nil {
		return cfg, usagef("-f: %v", err)
	}
	defer file.Close()
	dec := yaml.NewDecoder(file)
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil {
		return cfg, usagef("-f %s: %v", path, err)
	}
	return cfg, nil
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

func (a *App) start(ctx context.Context, cfg campaign.Config, wait, asJSON bool) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		// Validate's messages name the field and its range: print them as
		// they are, one per line.
		fmt.Fprintln(a.Err, err)
		return &exitError{code: ExitUsage}
	}
	if a.Preflight != nil {
		if err := a.Preflight(ctx, a.Env, cfg); err != nil {
			return failf("%v", err)
		}
	}
	c, err := a.temporal(ctx)
	if err != nil {
		return err
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
		fmt.Fprintf(a.Out, "started campaign %s: %s\n  Web UI: %s\n", cfg.ID, summary, link)
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

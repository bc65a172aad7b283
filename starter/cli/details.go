package cli

import (
	"fmt"
	"strings"

	"github.com/drover-crawl/drover/campaign"
)

// maxSummary keeps the static summary to one readable line in the Web UI.
const maxSummary = 200

// Summary is a campaign's one-line static summary in the Web UI:
// "crawl of <seeds> with N fetchers".
func Summary(cfg campaign.Config) string {
	seeds := strings.Join(cfg.Seeds, ", ")
	if len(cfg.Seeds) > 2 {
		seeds = fmt.Sprintf("%s, %s and %d more", cfg.Seeds[0], cfg.Seeds[1], len(cfg.Seeds)-2)
	}
	if cfg.SeedsFile != "" {
		seeds = strings.TrimPrefix(seeds+", ", ", ") + "the seeds of " + cfg.SeedsFile
	}
	s := fmt.Sprintf("crawl of %s with %d fetchers", seeds, cfg.Fetchers)
	if len(s) > maxSummary {
		s = s[:maxSummary-3] + "..."
	}
	return s
}

// Details is a campaign's static details in the Web UI: its config as
// markdown, and how to control it.
func Details(cfg campaign.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Crawl campaign `%s`\n\n| setting | value |\n|---|---|\n", cfg.ID)
	row := func(name string, value any) {
		fmt.Fprintf(&b, "| %s | %s |\n", name, strings.ReplaceAll(fmt.Sprint(value), "|", `\|`))
	}
	list := func(name string, xs []string) {
		if len(xs) > 0 {
			row(name, "`"+strings.Join(xs, "`<br>`")+"`")
		}
	}
	limit := func(name string, n int64, unit string) {
		if n > 0 {
			row(name, fmt.Sprintf("%d%s", n, unit))
		} else {
			row(name, "none")
		}
	}
	list("seeds", cfg.Seeds)
	if cfg.SeedsFile != "" {
		row("seeds file", fmt.Sprintf("`%s` (streamed to the schedulers; on %d hosts)", cfg.SeedsFile, len(cfg.SeedHosts)))
	}
	if len(cfg.Scope) == 0 {
		row("scope", "the seeds' hosts")
	}
	list("scope", cfg.Scope)
	list("exclude", cfg.Exclude)
	row("fetchers", cfg.Fetchers)
	limit("max pages", cfg.MaxPages, "")
	limit("max pages per host", cfg.MaxPagesPerHost, "")
	if n, ok := cfg.DepthLimit(); !ok {
		row("max depth", "none")
	} else if n == 0 {
		row("max depth", "0 (the seeds only)")
	} else {
		row("max depth", n)
	}
	if n := cfg.EmbedLimit(); n < 0 {
		row("page assets", "not fetched")
	} else {
		row("page assets", fmt.Sprintf("fetched; %d in a row may leave the scope", n))
	}
	if cfg.MaxDuration > 0 {
		row("max duration", cfg.MaxDuration)
	} else {
		row("max duration", "none")
	}
	row("per host", fmt.Sprintf("%d at a time, %s between starts", cfg.PerHostConcurrency, cfg.HostDelay()))
	if cfg.DelayFactor > 0 {
		row("adaptive delay", fmt.Sprintf("%g x the host's last response time, at most %s", cfg.DelayFactor, campaign.MaxAdaptiveDelay))
	}
	switch cfg.PolitenessKey {
	case campaign.KeyDomain:
		row("politeness key", "registered domain: the hosts of a domain share its delay")
	case campaign.KeyIP:
		row("politeness key", "IP address: the hosts served from one address share its delay, across schedulers")
	case campaign.KeyGroup:
		row("politeness key", fmt.Sprintf("group (%d hosts or domains in groups; the others by host)", len(cfg.PolitenessGroups)))
	}
	row("unreachable host", fmt.Sprintf("failed after %d retries, the first after %s", cfg.HostRetryCount(), cfg.HostRetryBackoff()))
	row("fail after", fmt.Sprintf("%s with every fetcher failing", cfg.FailAfterDuration()))
	row("priority", cfg.Priority)
	row("user agent", "`"+cfg.UserAgent+"`")
	if cfg.Sitemaps {
		row("sitemaps", "yes")
	}
	list("dropped parameters", cfg.DropParams)
	if cfg.NotifyURL != "" {
		row("notify", cfg.NotifyURL)
	}
	list("sinks", cfg.Sinks)
	if cfg.AllowPrivate {
		row("private addresses", "allowed")
	}
	fmt.Fprintf(&b, "\nControl: `starter status %[1]s`, `starter pause %[1]s`, `starter resume %[1]s`, "+
		"`starter scale %[1]s N`, `starter stop %[1]s` (or the signals pause, resume, stop, restart and the update scale).\n", cfg.ID)
	return b.String()
}

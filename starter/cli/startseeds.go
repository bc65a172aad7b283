package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/urlrule"
)

// streamsSeeds: a campaign's seeds are streamed to the schedulers before it
// starts rather than carried in its input: a --seeds-file, or more seeds
// than campaign.MaxInlineSeeds (unless they are scored: seed_scores need
// the workflow's Seed activity).
func streamsSeeds(cfg campaign.Config) bool {
	return cfg.SeedsFile != "" || (len(cfg.Seeds) > campaign.MaxInlineSeeds && len(cfg.SeedScores) == 0)
}

// startSeeds streams a campaign's seeds to a scheduler before the workflow
// starts. The starter names the run (campaign.Config.Run) so that the seeds
// land in the run's frontier; the config then carries the seeds' hosts
// (its scope, when it has no scope regexes) instead of the seeds. A start
// stopped midway leaves a run no workflow has: the ID's next start removes
// it (each scheduler removes earlier runs of an ID when a new one is
// seeded there).
func (a *App) startSeeds(ctx context.Context, c Campaigns, cfg campaign.Config, stdin io.Reader) (campaign.Config, error) {
	// Seeding a new run removes the earlier runs' frontiers: never while
	// one runs.
	if ex, err := c.Describe(ctx, cfg.ID); err == nil && ex.Status == StatusRunning {
		return cfg, failf("campaign %s is already running; stop it first or pick another --id", cfg.ID)
	}
	src := cfg.SeedsFile
	if len(cfg.Seeds) > campaign.MaxInlineSeeds && len(cfg.SeedScores) == 0 {
		// Too many for the input: streamed like a list, and the config
		// says where they came from.
		stdin, src = strings.NewReader(strings.Join(cfg.Seeds, "\n")), "-"
		cfg.SeedsFile = fmt.Sprintf("the %d seeds of the config", len(cfg.Seeds))
		cfg.Seeds = nil
	}
	cfg.Run = campaign.NewRun(a.Now(), rand.Uint64())
	hosts := map[string]bool{}
	o := seedfile.Options{DropParams: cfg.DropParams}
	if len(cfg.Scope) == 0 {
		o.Hosts, o.MaxHosts = hosts, campaign.MaxSeedHosts
	}
	counts, err := a.streamSeeds(ctx, cfg, src, stdin, o)
	switch {
	case errors.Is(err, seedfile.ErrTooManyHosts):
		return cfg, failf("campaign %s not started: its seeds are on more than %d hosts, too many for its config to carry as its scope; give --scope regexes (the seeds streamed so far are removed when the ID starts again)",
			cfg.ID, campaign.MaxSeedHosts)
	case err != nil:
		return cfg, failf("campaign %s not started: %v (after line %d; start it again: what was streamed is removed then)", cfg.ID, err, counts.Lines)
	case counts.Seeded+counts.Known == 0 && len(cfg.Seeds) == 0:
		_ = refusedSeeds(a, counts)
		return cfg, failf("campaign %s not started: no seed in %s (%d lines)", cfg.ID, cfg.SeedsFile, counts.Lines)
	}
	for _, s := range cfg.Seeds {
		if h, err := urlrule.HostKey(s); err == nil {
			delete(hosts, h) // in the scope through Seeds already
		}
	}
	cfg.SeedHosts = slices.Sorted(maps.Keys(hosts))
	if cfg.SeedHostBytes() > campaign.MaxSeedHostBytes {
		return cfg, failf("campaign %s not started: its seeds' %d host names take %d bytes, more than the %d its config can carry as its scope; give --scope regexes (the seeds streamed are removed when the ID starts again)",
			cfg.ID, len(cfg.SeedHosts), cfg.SeedHostBytes(), campaign.MaxSeedHostBytes)
	}
	fmt.Fprintf(a.Err, "campaign %s: %s\n", cfg.ID, seedText(cfg.SeedsFile, counts))
	// Lines not queued are said loudly; the campaign starts with the rest.
	_ = refusedSeeds(a, counts)
	return cfg, nil
}

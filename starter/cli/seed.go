package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/drover-crawl/drover/workflows"
)

// SeedControlFunc opens a control session to one scheduler, to stream
// seeds through; session.Client.DialControl in production.
type SeedControlFunc func(ctx context.Context, addr, token string) (seedfile.Control, error)

// seedTimeout bounds `starter seed`: a million seeds stream in a few
// minutes.
const seedTimeout = 2 * time.Hour

func isURL(s string) bool { return strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") }

func (a *App) seedCommand() *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "seed ID --file F",
		Short: "Add seeds to a running campaign from a list: a file (plain or gzip), - (standard input) or an http(s) URL",
		Long: `seed adds the seeds of a list, one URL a line (blank lines and lines
starting with # are skipped), to a running campaign. The list is streamed to
the schedulers in batches; it never rides in the workflow's input or history,
which records the list's name and its counts (an Update "seed").

  --file https://host/seeds.gz   the campaign's workflow streams it, from a
                                 worker (SeedFile activity): a worker that dies
                                 mid-list is replaced, resuming after the last
                                 batch it reported
  --file seeds.txt.gz, --file -  the starter streams it itself; if it is
                                 stopped mid-list, run it again

A gzip list is read as such whatever its name. A seed already queued in this
run is skipped and counted as known, so running the command again queues only
what is missing. A seed the campaign's scope refuses (a host that is not one
of the seeds' hosts, when the campaign has no --scope; see starter include)
is not queued: it is counted and listed, and the command exits 1. An invalid
line is listed the same way.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if file == "" {
				return usagef("give the seed list: --file PATH, --file - (standard input) or --file URL")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), seedTimeout)
			defer cancel()
			res, err := a.addSeeds(ctx, args[0], file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			if asJSON {
				if err := writeJSON(a.Out, res); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(a.Out, "campaign %s: %s\n", args[0], seedText(file, res.Counts))
			}
			return refusedSeeds(a, res.Counts)
		},
	}
	cmd.Flags().StringVar(&file, "file", "", "the seed list: a path (plain or gzip), - for standard input, or an http(s) URL")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the result as JSON: {source, counts: {lines, seeded, known, invalid, refused, examples}, seeds_added}`)
	return cmd
}

// addSeeds streams the list src into campaign id: through the workflow
// (a URL) or from here, recorded by the Update then.
func (a *App) addSeeds(ctx context.Context, id, src string, stdin io.Reader) (workflows.SeedFileResult, error) {
	var res workflows.SeedFileResult
	spec := updateSpec{what: "seed list", refused: "seed " + src, within: seedTimeout}
	if isURL(src) {
		return res, a.update(ctx, id, spec, workflows.UpdateSeed, workflows.SeedFileRequest{Source: src}, &res)
	}
	cfg, err := a.runningConfig(ctx, id)
	if err != nil {
		return res, err
	}
	scope, err := urlrule.NewScope(cfg)
	if err != nil {
		return res, failf("campaign %s: its scope: %v", id, err)
	}
	c, streamErr := a.streamSeeds(ctx, cfg, src, stdin, seedfile.Options{DropParams: cfg.DropParams, Scope: scope})
	if errors.Is(streamErr, errSeedList) {
		return res, failf("%v", streamErr)
	}
	// Recorded even when it stopped midway: what it queued is queued.
	if err := a.update(ctx, id, spec, workflows.UpdateSeed, workflows.SeedFileRequest{Source: src, Streamed: &c}, &res); err != nil {
		return res, err
	}
	if streamErr != nil {
		return res, failf("campaign %s: seeding from %s stopped after line %d (%s): %v; run the command again: seeds already queued are skipped",
			id, src, c.Lines, seedText(src, c), streamErr)
	}
	return res, nil
}

// runningConfig is the config of campaign id, which must be running.
func (a *App) runningConfig(ctx context.Context, id string) (campaign.Config, error) {
	var cfg campaign.Config
	c, err := a.temporal(ctx)
	if err != nil {
		return cfg, err
	}
	var st workflows.Status
	if err := c.Query(ctx, id, workflows.QueryStatus, &st); err != nil {
		if errors.Is(err, ErrNotFound) {
			return cfg, a.notRunning(ctx, c, id)
		}
		return cfg, failf("cannot ask campaign %s for its status: %v", id, err)
	}
	if st.State != campaign.StateRunning && st.State != campaign.StatePaused && st.State != campaign.StateStarting {
		return cfg, failf("campaign %s is %s: it takes no more seeds", id, st.State)
	}
	if err := c.Query(ctx, id, workflows.QueryConfig, &cfg); err != nil {
		return cfg, failf("cannot ask campaign %s for its config (a worker older than the seed command?): %v", id, err)
	}
	return cfg.WithDefaults(), nil
}

// errSeedList: the seed list could not be opened.
var errSeedList = errors.New("seed list")

// streamSeeds streams src to the first scheduler that answers, as seeds
// of cfg's run.
func (a *App) streamSeeds(ctx context.Context, cfg campaign.Config, src string, stdin io.Reader, o seedfile.Options) (seedfile.Counts, error) {
	if a.SeedControl == nil {
		return seedfile.Counts{}, fmt.Errorf("%w: no scheduler client configured", errSeedList)
	}
	rc, err := seedfile.Open(ctx, src, stdin)
	if err != nil {
		return seedfile.Counts{}, fmt.Errorf("%w: %v", errSeedList, err)
	}
	defer rc.Close()
	s := &seedfile.Seeder{Config: cfg, Addrs: a.Env.Schedulers, Dial: func(ctx context.Context, addr string) (seedfile.Control, error) {
		return a.SeedControl(ctx, addr, a.Env.Token)
	}}
	defer s.Close()
	return seedfile.Stream(ctx, rc, o, s.Send)
}

// seedText says what a seed list did.
func seedText(src string, c seedfile.Counts) string {
	return fmt.Sprintf("%d seeds queued from %s (%d already queued, %d invalid lines, %d refused by the scope; %d lines)",
		c.Seeded, src, c.Known, c.Invalid, c.Refused, c.Lines)
}

// refusedSeeds fails (exit 1) when a seed was not queued for a reason
// other than being queued already, listing the first ones.
func refusedSeeds(a *App, c seedfile.Counts) error {
	if c.Invalid == 0 && c.Refused == 0 {
		return nil
	}
	fmt.Fprintf(a.Err, "%d lines were not queued (%d invalid, %d refused by the scope); the first:\n", c.Invalid+c.Refused, c.Invalid, c.Refused)
	for _, e := range c.Examples {
		fmt.Fprintf(a.Err, "  %s\n", e)
	}
	if c.Refused > 0 {
		fmt.Fprintln(a.Err, "to crawl seeds out of scope, widen it first (starter include ID REGEX), then run the command again: seeds already queued are skipped")
	}
	return &exitError{code: ExitFailure}
}

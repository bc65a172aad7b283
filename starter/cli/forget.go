package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// ForgetHistoryFunc drops a lineage's fetch history on every scheduler;
// the starter's main gives session.Client.ForgetHistory.
type ForgetHistoryFunc func(ctx context.Context, addrs []string, token, lineage string) error

// forgetTimeout bounds `forget`: one range delete per scheduler.
const forgetTimeout = 30 * time.Second

func (a views) forgetCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "forget LINEAGE",
		Short: "Drop a lineage's fetch history on every scheduler: its next run fetches every URL in full",
		Long: `Drop the fetch history of LINEAGE (the campaign ID that --from names) on
every scheduler: validators, digests, links and the captures revisits refer
to. The next run that reads it (--from LINEAGE) fetches every URL in full;
the archives already written are untouched. A scheduler on which a campaign
of the lineage is open refuses, and so does the starter while the campaign
whose ID is LINEAGE runs (Temporal says so): stop it first. Nothing is
dropped unless every scheduler can drop its share.`,
		Args: exactArgs("LINEAGE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			lineage := strings.TrimSpace(args[0])
			if lineage == "" {
				return usagef("forget: name a lineage (a campaign ID)")
			}
			if a.ForgetHistory == nil {
				return failf("no scheduler client configured")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), forgetTimeout)
			defer cancel()
			if err := a.lineageIdle(ctx, lineage); err != nil {
				return err
			}
			if err := a.ForgetHistory(ctx, a.Env.Schedulers, a.Env.Token, lineage); err != nil {
				return failf("the fetch history of lineage %s is not forgotten everywhere: %v", lineage, err)
			}
			if asJSON {
				return writeJSON(a.Out, map[string]any{"lineage": lineage, "forgotten": true, "schedulers": a.Env.Schedulers})
			}
			fmt.Fprintf(a.Out, "forgot the fetch history of lineage %s on %s\n", lineage, strings.Join(a.Env.Schedulers, ", "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the result as JSON: {lineage, forgotten, schedulers}")
	return cmd
}

// lineageIdle refuses to forget the lineage of a campaign that runs: the
// campaign whose ID it is writes it (runs --from it under other IDs are
// found by the schedulers). Temporal out of reach is not a refusal: the
// schedulers still check the campaigns open on them.
func (a views) lineageIdle(ctx context.Context, lineage string) error {
	c, err := a.temporal(ctx)
	if err != nil {
		fmt.Fprintf(a.Err, "warning: Temporal not reached, so only the schedulers check that no campaign uses lineage %s: %v\n", lineage, err)
		return nil
	}
	ex, err := c.Describe(ctx, lineage)
	if err == nil && ex.Status == StatusRunning {
		return failf("campaign %s is running and writes lineage %s: stop it first (starter stop %s)", lineage, lineage, lineage)
	}
	return nil
}

package cli

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/workflows"
)

// rulesTimeout bounds exclude and host. The workflow answers once every
// scheduler applied the rules, and a scheduler applies an exclude once no
// lease of a URL it matches is out: at most the longest a lease lives (5
// minutes by default, workflows' rulesWithin covers it).
const rulesTimeout = 7 * time.Minute

func (a *App) excludeCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "exclude ID REGEX",
		Short: "Stop fetching the URLs a regular expression matches, in a running campaign",
		Long: `exclude adds REGEX to a running campaign's excludes: a URL it matches
(anywhere in the normalized URL, Go regexp syntax) is no longer fetched. The URLs it matches that were queued or held by a scheduler
are settled as failures of reason "excluded" (` + "`starter failures ID --reason excluded`" + `
lists them), and so are those that reach a scheduler later; links it matches
are not queued.

It returns once every scheduler applied it, after the fetches of matching URLs
already under way finished (at most a lease's timeout, a minute by default):
from then on no matching URL is fetched. --json prints the campaign's live
rules (excludes and host rules added while it runs) as they now stand.`,
		Args: exactArgs("ID", "REGEX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, re := args[0], args[1]
			if re == "" {
				return usagef("REGEX is empty; give the part of the URLs to exclude, such as /calendar/")
			}
			if err := (campaign.Rules{Exclude: []string{re}}).Validate(); err != nil {
				return refuseRules(a, err)
			}
			var res workflows.RulesResult
			if err := a.update(cmd.Context(), id, updateSpec{what: "exclude", refused: "exclude " + quoted(re), within: rulesTimeout},
				workflows.UpdateRules, workflows.RulesRequest{Exclude: re}, &res); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.Out, res)
			}
			fmt.Fprintf(a.Out, "campaign %s: %s\n", id, excludeText(id, re, res))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the campaign's live rules as JSON: {"rules": {version, exclude, hosts}}`)
	return cmd
}

func (a *App) includeCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "include ID REGEX",
		Short: "Widen a running campaign's scope to the URLs a regular expression matches",
		Long: `include adds REGEX to a running campaign's scope: a link whose normalized URL
it matches (anywhere, Go regexp syntax) is crawled from then on, whatever the
campaign's scope said (its --scope regexes, or its seeds' hosts). Excludes,
the depth limit and the trap guards still apply.

Workers judge links when their fetcher session starts, so the workflow ends
its running sessions and starts them again with the new scope (their leases
go back to the frontier; nothing is lost, and the restarts are not counted as
failures). Links found before then were judged by the old scope and are not
looked at again. It returns once every scheduler took the rules; --json
prints the campaign's live rules as they now stand.`,
		Args: exactArgs("ID", "REGEX"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, re := args[0], args[1]
			if re == "" {
				return usagef("REGEX is empty; give the URLs to take in, such as ^https?://news[.]example/")
			}
			if err := (campaign.Rules{Include: []string{re}}).Validate(); err != nil {
				return refuseRules(a, err)
			}
			var res workflows.RulesResult
			if err := a.update(cmd.Context(), id, updateSpec{what: "include", refused: "include " + quoted(re), within: rulesTimeout},
				workflows.UpdateRules, workflows.RulesRequest{Include: re}, &res); err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.Out, res)
			}
			fmt.Fprintf(a.Out, "campaign %s: including %s (rules version %d; links are judged by the wider scope from now on)\n", id, quoted(re), res.Rules.Version)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, `print the campaign's live rules as JSON: {"rules": {version, exclude, include, hosts}}`)
	return cmd
}

// hostFlags are the flags of `starter host`; a flag not given leaves its
// field of the rule nil.
type hostFlags struct {
	delay       time.Duration
	concurrency int
	blockUntil  string
	json        bool
}

func (a *App) hostCommand() *cobra.Command {
	var f hostFlags
	cmd := &cobra.Command{
		Use:   "host ID HOST [--delay D] [--concurrency N] [--block-until T]",
		Short: "Set one host's delay, concurrency or block in a running campaign",
		Long: `host sets the politeness of one host of a running campaign, from the host's
next lease on; give at least one of:

  --delay D          between two requests to the host (0: none; 0 to 1h)
  --concurrency N    requests to the host at once (1 to 256)
  --block-until T    no request to the host starts before T: a time in RFC 3339
                     (2026-12-06T18:00:00Z) or a duration from now (10m, 2h)

HOST is a host name as URLs have it (news.example, any case), without scheme,
port or path; the rule covers every port of the host.

A flag left out keeps what an earlier host command gave HOST, else the
campaign's value as it was started (its hosts: rule for HOST, else
--per-host-delay and --per-host-concurrency). A block in force is not
shortened by a later rule.

It returns once every scheduler took the rule, and prints the host's rule;
--json prints the campaign's live rules (excludes and host rules added while
it runs) as they now stand.`,
		Args: exactArgs("ID", "HOST"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			rule, err := f.rule(cmd, args[1], a.Now())
			if err != nil {
				return err
			}
			if err := (campaign.Rules{Hosts: []campaign.HostRule{rule}}).Validate(); err != nil {
				return refuseRules(a, err)
			}
			var res workflows.RulesResult
			if err := a.update(cmd.Context(), id, updateSpec{what: "host rule", refused: "host " + rule.Host, within: rulesTimeout},
				workflows.UpdateRules, workflows.RulesRequest{Host: &rule}, &res); err != nil {
				return err
			}
			if f.json {
				return writeJSON(a.Out, res)
			}
			fmt.Fprintf(a.Out, "campaign %s: %s\n", id, hostText(rule, res))
			return nil
		},
	}
	fl := cmd.Flags()
	fl.DurationVar(&f.delay, "delay", 0, "time between two requests to the host (0: none); left out: the last host command's, else the campaign's")
	fl.IntVar(&f.concurrency, "concurrency", 0, "requests to the host at once (1-256); left out: the last host command's, else the campaign's")
	fl.StringVar(&f.blockUntil, "block-until", "", "no request to the host starts before this time: RFC 3339, or a duration from now (10m)")
	fl.BoolVar(&f.json, "json", false, `print the campaign's live rules as JSON: {"rules": {version, exclude, hosts}}`)
	return cmd
}

// rule is the host rule the flags given make: those left out stay nil.
func (f hostFlags) rule(cmd *cobra.Command, host string, now time.Time) (campaign.HostRule, error) {
	rule := campaign.HostRule{Host: host}
	if err := checkHostName(host); err != nil {
		return rule, err
	}
	fl := cmd.Flags()
	if !fl.Changed("delay") && !fl.Changed("concurrency") && !fl.Changed("block-until") {
		return rule, usagef("give at least one of --delay, --concurrency and --block-until")
	}
	if fl.Changed("delay") {
		rule.Delay = new(f.delay)
	}
	if fl.Changed("concurrency") {
		rule.Concurrency = new(f.concurrency)
	}
	if fl.Changed("block-until") {
		t, err := parseBlockUntil(f.blockUntil, now)
		if err != nil {
			return rule, err
		}
		rule.BlockUntil = &t
	}
	return rule, nil
}

// checkHostName refuses a HOST no URL's host key equals (a scheduler
// matches host rules on the host name alone): a URL, or a name with a port.
func checkHostName(host string) error {
	_, _, err := net.SplitHostPort(host)
	if host == "" || strings.ContainsAny(host, "/?#@ ") || err == nil {
		return usagef("HOST %q: a host name such as news.example, without scheme, port or path", host)
	}
	return nil
}

// parseBlockUntil reads --block-until: an RFC 3339 time, or a duration
// from now.
func parseBlockUntil(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if !t.After(now) {
			return t, usagef("--block-until %s: is not in the future", s)
		}
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return time.Time{}, usagef("--block-until %q: want a time in RFC 3339 (2026-12-06T18:00:00Z) or a duration from now (10m)", s)
	}
	if d <= 0 {
		return time.Time{}, usagef("--block-until %s: a duration from now must be more than 0", s)
	}
	return now.Add(d).Round(0), nil
}

// refuseRules prints the rules' own messages (Rules.Validate: the field
// and its range), one per line, as start does for a config: a usage error.
func refuseRules(a *App, err error) error {
	fmt.Fprintln(a.Err, err)
	return &exitError{code: ExitUsage}
}

// quoted is s in double quotes, as typed: %q would double a regular
// expression's backslashes.
func quoted(s string) string { return `"` + s + `"` }

// excludeText says what an exclude did.
func excludeText(id, re string, res workflows.RulesResult) string {
	return fmt.Sprintf("excluding %s (rules version %d; URLs it matches that were queued are settled as \"excluded\": starter failures %s --reason excluded)",
		quoted(re), res.Rules.Version, id)
}

// hostText says what a host rule now is: the campaign's live rule for the
// host (sent is the rule asked for, should the result not hold it).
func hostText(sent campaign.HostRule, res workflows.RulesResult) string {
	rule := sent
	for _, h := range res.Rules.Hosts {
		if strings.EqualFold(h.Host, sent.Host) {
			rule = h
		}
	}
	delay, conc, block := "delay as started", "concurrency as started", "block as started"
	switch {
	case rule.Delay != nil && *rule.Delay == 0:
		delay = "delay 0s (none)"
	case rule.Delay != nil:
		delay = "delay " + rule.Delay.String()
	}
	if rule.Concurrency != nil {
		conc = fmt.Sprintf("concurrency %d", *rule.Concurrency)
	}
	if rule.BlockUntil != nil {
		block = "blocked until " + rule.BlockUntil.Format(time.RFC3339)
	}
	return fmt.Sprintf("host %s: %s, %s, %s (rules version %d, from the host's next lease)",
		rule.Host, delay, conc, block, res.Rules.Version)
}

package cli

import (
	"context"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/session"
	"github.com/spf13/cobra"
)

// views are the commands that read what the schedulers hold of a
// campaign, not its workflow: its failure records (`failures`), where a
// URL stands (`url`, `urls`), its lineage's fetch history (`forget`).
type views struct{ *App }

// FailuresFunc lists a campaign's failure records from every scheduler, by
// URL, with their total (which exceeds the list when a scheduler cut it);
// session.Client.Failures in production.
type FailuresFunc func(ctx context.Context, addrs []string, token, campaignID, reason string) ([]failure.Record, int, error)

// DropFailuresFunc forgets a campaign's failure records on every
// scheduler; the starter's main gives session.Client.DropFailures.
type DropFailuresFunc func(ctx context.Context, addrs []string, token, campaignID string) error

// FailureList is `failures --json`: the records listed, by URL, and how many
// there are (Total > len(Failures) when the list was cut).
type FailureList struct {
	ID       string           `json:"id"`
	Total    int              `json:"total"`
	Reason   string           `json:"reason,omitempty"`
	Failures []failure.Record `json:"failures"`
}

// failuresTimeout bounds one listing: every scheduler is asked in turn, and
// a long list is tens of megabytes.
const failuresTimeout = time.Minute

// tableWidth is the line width the text table's last error is trimmed to
// (at least minErrorWidth of it is kept); --json has it whole.
const (
	tableWidth    = 200
	minErrorWidth = 40
)

// reasonWord is the form of a failure reason: one word (dns, 4xx, ...).
// The list of reasons grows with the fetcher, so it is not closed here.
var reasonWord = regexp.MustCompile(`^[a-z0-9_-]+$`)

func (a views) failuresCommand() *cobra.Command {
	var asJSON, clear bool
	var reason string
	cmd := &cobra.Command{
		Use:   "failures ID",
		Short: "List the URLs of a campaign that did not become a page, with why",
		Long: `failures lists every URL of a campaign that did not become a page, and every
page with an error status, from every scheduler (DROVER_SCHEDULER), sorted by
URL: its reason, attempts, first and last failure, and last error.

Reasons: dns, refused, timeout, tls, reset (the host could not be reached;
after --host-retries the host is failed for the campaign and all its URLs
with it), robots (robots.txt disallows the URL, or could not be fetched),
4xx, 5xx (the server's status), sink (every sink refused the page), lost
(its lease was lost too often), unreadable (a frontier message or URL that
cannot be used), vanished (a shard queue RabbitMQ lost while the campaign
ran, named in place of a URL: the URLs it held are lost), excluded (an
exclude added while the campaign ran matched it: starter exclude), other.

The records stay after the campaign ended. They are removed only by a new
run of the same campaign ID or by --clear. They live in the schedulers,
under the run's frontier key, which Temporal knows (the latest run of the
ID); without Temporal, give the key itself (ID~RUN, in status --json as
"frontier").`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			reason = strings.ToLower(strings.TrimSpace(reason))
			if reason != "" && !reasonWord.MatchString(reason) {
				return usagef("--reason %q: a reason is one word, such as dns, refused, robots or 4xx", reason)
			}
			if clear && reason != "" {
				return usagef("--clear drops every failure record of the campaign; it takes no --reason")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), failuresTimeout)
			defer cancel()
			key := a.frontierKey(ctx, id)
			if clear {
				return a.clearFailures(ctx, id, key, asJSON)
			}
			return a.listFailures(ctx, id, key, reason, asJSON)
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the records as JSON: {id, total, failures: [...]}")
	cmd.Flags().StringVar(&reason, "reason", "", "only the records with this reason (dns, refused, robots, 4xx, ...)")
	cmd.Flags().BoolVar(&clear, "clear", false, "drop the campaign's failure records on every scheduler (the only way besides a new run of the ID)")
	return cmd
}

// frontierKeyWithin bounds the look-up of a campaign's frontier key.
const frontierKeyWithin = 5 * time.Second

// frontierKey is what the schedulers know the latest run of campaign id
// by (its memo, workflows.MemoFrontier); id itself when Temporal cannot
// tell (unreachable, no such campaign, a run started before runs had
// names, or id is already a key).
func (a views) frontierKey(ctx context.Context, id string) string {
	if strings.Contains(id, campaign.RunSep) {
		return id
	}
	c, err := a.temporal(ctx)
	if err != nil {
		return id
	}
	dctx, cancel := context.WithTimeout(ctx, frontierKeyWithin)
	defer cancel()
	ex, err := c.Describe(dctx, id)
	if err != nil {
		return id
	}
	return ex.FrontierKey()
}

func (a views) listFailures(ctx context.Context, id, key, reason string, asJSON bool) error {
	if a.Failures == nil {
		return failf("no scheduler client configured")
	}
	fs, total, err := a.Failures(ctx, a.Env.Schedulers, a.Env.Token, key, reason)
	if err != nil {
		return failf("cannot read the failures of campaign %s: %v", id, err)
	}
	if fs == nil {
		fs = []failure.Record{}
	}
	if asJSON {
		return writeJSON(a.Out, FailureList{ID: id, Total: total, Reason: reason, Failures: fs})
	}
	renderFailures(a.Out, id, reason, fs, total, a.Env.Schedulers)
	return nil
}

func (a views) clearFailures(ctx context.Context, id, key string, asJSON bool) error {
	if a.DropFailures == nil {
		return failf("no scheduler client configured")
	}
	if err := a.DropFailures(ctx, a.Env.Schedulers, a.Env.Token, key); err != nil {
		return failf("cannot drop the failures of campaign %s: %v", id, err)
	}
	if asJSON {
		return writeJSON(a.Out, map[string]any{"id": id, "cleared": true, "schedulers": a.Env.Schedulers})
	}
	fmt.Fprintf(a.Out, "dropped the failure records of campaign %s on %s\n", id, strings.Join(a.Env.Schedulers, ", "))
	return nil
}

// renderFailures prints the records as a table under a line that counts
// them by reason and says when the list was cut.
func renderFailures(w io.Writer, id, reason string, fs []failure.Record, total int, schedulers []string) {
	if len(fs) == 0 {
		what := "no failure records"
		if reason != "" {
			what += " with reason " + reason
		}
		fmt.Fprintf(w, "%s for campaign %s on %s\n", what, id, strings.Join(schedulers, ", "))
		return
	}
	counts := map[string]int64{}
	for _, f := range fs {
		counts[f.Reason]++
	}
	fmt.Fprintf(w, "campaign %s: ", id)
	if total > len(fs) {
		fmt.Fprintf(w, "%d of %d failures listed (each scheduler sends at most %d; --reason narrows the list)",
			len(fs), total, session.MaxFailuresReply)
	} else {
		fmt.Fprintf(w, "%d failures", len(fs))
	}
	if reason != "" {
		fmt.Fprintf(w, " with reason %s\n", reason)
	} else {
		fmt.Fprintf(w, ": %s\n", byReason(counts))
	}

	// The last error takes what the line has left after the other
	// columns, the URL column being as wide as the longest URL.
	urlWidth := 0
	for _, f := range fs {
		urlWidth = max(urlWidth, utf8.RuneCountInString(f.URL))
	}
	const fixed = 8 + 2 + 8 + 2 + 19 + 2 + 19 + 2 + 2 // reason, attempts, first, last, gaps
	errWidth := max(tableWidth-fixed-urlWidth, minErrorWidth)

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REASON\tATTEMPTS\tFIRST\tLAST\tURL\tLAST ERROR")
	for _, f := range fs {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", f.Reason, f.Attempts, stamp(f.First), stamp(f.Last), f.URL,
			trim(oneLine(orElse(f.LastError, "-")), errWidth))
	}
	tw.Flush()
}

// byReason formats counts by reason, by reason's name: "dns 3, refused 4".
func byReason(counts map[string]int64) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}

func sum(counts map[string]int64) int64 {
	var n int64
	for _, v := range counts {
		n += v
	}
	return n
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format(time.DateTime)
}

// trim cuts s to n runes, marking the cut with "…".
func trim(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

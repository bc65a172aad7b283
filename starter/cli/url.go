package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drover-crawl/drover/session"
	"github.com/spf13/cobra"
)

// URLStateFunc asks every scheduler where one URL of a campaign stands and
// returns the most telling answer; session.Client.URLState in production.
type URLStateFunc func(ctx context.Context, addrs []string, token, key, url string) (session.URLState, error)

// urlTimeout bounds `starter url`.
const urlTimeout = 30 * time.Second

func (a views) urlCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "url ID URL",
		Short: "Say where one URL of a campaign stands: leased, held, parked (until when), failed (why), done, queued or unknown",
		Long: `url asks every scheduler (DROVER_SCHEDULER) where one URL of a campaign
stands, and prints the most telling answer:

  leased   a fetcher has it now (until its lease's deadline)
  held     a scheduler holds it, waiting for its host's turn
  failed   settled without a page, or with an error status: the reason, the
           attempts and the last error (as starter failures lists it)
  done     its outcome is recorded: its page is stored
  queued   published (a seed or a link) and not settled yet: in a shard
           queue, parked for a retry, or held by a scheduler that did not answer
  ended    the run has ended and its marks went with its queues: the URL was
           done or never queued (a failed one still says failed)
  unknown  never queued in this run of the campaign (out of scope, not found
           yet, or excluded before it was found)

A URL the campaign's fetch history knows also shows its last capture (its
date and status, from this run or an earlier one of its lineage) and, in a
continuous campaign, when it is due again.

The URL is normalized as the campaign normalizes its links.`,
		Args: exactArgs("ID", "URL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.URLState == nil {
				return failf("no scheduler client configured")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), urlTimeout)
			defer cancel()
			id := args[0]
			st, err := a.URLState(ctx, a.Env.Schedulers, a.Env.Token, a.frontierKey(ctx, id), args[1])
			if err != nil && st.State == "" {
				return failf("cannot ask where %s stands in campaign %s: %v", args[1], id, err)
			}
			if asJSON {
				return writeJSON(a.Out, st)
			}
			fmt.Fprintf(a.Out, "campaign %s: %s\n", id, urlText(st))
			if err != nil {
				fmt.Fprintf(a.Err, "warning: not every scheduler answered, so the state may be less than the truth: %v\n", err)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the state as JSON")
	return cmd
}

// urlText is one URL's state in words.
func urlText(st session.URLState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is %s", st.URL, st.State)
	switch st.State {
	case session.URLLeased:
		fmt.Fprintf(&b, " (on scheduler %s, until %s", st.Scheduler, stamp(st.LeaseDeadline))
		urlHostText(&b, st)
		b.WriteString(")")
	case session.URLHeld:
		fmt.Fprintf(&b, " (on scheduler %s", st.Scheduler)
		urlHostText(&b, st)
		b.WriteString(")")
	case session.URLParked:
		fmt.Fprintf(&b, " until %s (with scheduler %s's park mover)", stamp(st.ParkedUntil), st.Scheduler)
	case session.URLFailed:
		if f := st.Failure; f != nil {
			fmt.Fprintf(&b, ": %s after %d attempts, last %s: %s", f.Reason, f.Attempts, stamp(f.Last), orElse(oneLine(f.LastError), "-"))
		}
	case session.URLDone:
		b.WriteString(": its page is stored")
	case session.URLEnded:
		b.WriteString(": the run has ended and its marks are gone; the URL was fetched or never queued (a failed URL would say failed)")
	case session.URLQueued:
		b.WriteString(": published and not settled yet (in a shard queue, parked for a retry, or held by a scheduler that did not answer)")
	default:
		b.WriteString(": never queued in this run of the campaign")
	}
	if l := st.Last; l != nil {
		fmt.Fprintf(&b, "\n  last capture %s, status %d (history of %s)", stamp(l.Date), l.Status, l.Lineage)
		if !l.NextDue.IsZero() {
			fmt.Fprintf(&b, "; fetched again %s, next fetch due %s", stamp(l.Fetched), stamp(l.NextDue))
		}
	}
	return b.String()
}

func urlHostText(b *strings.Builder, st session.URLState) {
	if st.Host == "" {
		return
	}
	fmt.Fprintf(b, "; host %s holds %d URLs here", st.Host, st.HostQueue)
	if !st.HostNext.IsZero() {
		fmt.Fprintf(b, ", next request from %s", stamp(st.HostNext))
	}
}

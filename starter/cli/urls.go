package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/session"
)

// URLsFunc asks every scheduler for a page of one host's URLs in one
// state and merges them; session.Client.URLs in production.
type URLsFunc func(ctx context.Context, addrs []string, token, key string, q session.URLQuery) (session.URLPage, error)

type urlsFlags struct {
	host, state, after string
	limit              int
	json               bool
}

func (a *App) urlsCommand() *cobra.Command {
	var f urlsFlags
	cmd := &cobra.Command{
		Use:   "urls ID --host H --state S [--limit N] [--after URL]",
		Short: "List the URLs of one host of a campaign in one state (leased, held or failed), a page at a time",
		Long: `urls asks every scheduler (DROVER_SCHEDULER) for the URLs of one host of a
running campaign in one state, and prints them one a line, in URL order:

  leased   a fetcher has it now
  held     a scheduler holds it, waiting for the host's turn
  failed   settled without a page, or with an error status (also after the
           campaign ended, until its ID runs again)

Done and queued URLs cannot be listed: the schedulers keep a hash of each,
not the URL (starter url says where one URL stands).

A page holds at most --limit URLs (1-1000, default 100); when there are more,
it says how to ask for the next one (--after the page's last URL). Each
scheduler copies only what it holds of the host, so the command never stalls
a scheduler. HOST is a host name as URLs have it (news.example), without
scheme, port or path.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := args[0]
			if err := f.check(); err != nil {
				return err
			}
			if a.URLs == nil {
				return failf("no scheduler client configured")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), urlTimeout)
			defer cancel()
			q := session.URLQuery{Host: f.host, State: f.state, After: f.after, Limit: f.limit}
			page, err := a.URLs(ctx, a.Env.Schedulers, a.Env.Token, a.frontierKey(ctx, id), q)
			if err != nil && len(page.URLs) == 0 {
				return failf("cannot list the %s URLs of %s in campaign %s: %v", f.state, f.host, id, err)
			}
			if f.json {
				if jerr := writeJSON(a.Out, page); jerr != nil {
					return jerr
				}
			} else {
				for _, u := range page.URLs {
					fmt.Fprintln(a.Out, u)
				}
				if page.Next != "" {
					fmt.Fprintf(a.Err, "more: starter urls %s --host %s --state %s --limit %d --after '%s'\n", id, f.host, f.state, f.limit, page.Next)
				}
			}
			if err != nil {
				fmt.Fprintf(a.Err, "warning: not every scheduler answered, so the list may miss URLs: %v\n", err)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.host, "host", "", "the host (required)")
	fl.StringVar(&f.state, "state", "", "leased, held or failed (required)")
	fl.IntVar(&f.limit, "limit", 100, fmt.Sprintf("URLs in a page (1-%d)", session.MaxURLsPage))
	fl.StringVar(&f.after, "after", "", "list the URLs after this one (the last of the previous page)")
	fl.BoolVar(&f.json, "json", false, `print the page as JSON: {"urls": [...], "next": URL}`)
	return cmd
}

func (f urlsFlags) check() error {
	if err := checkHostName(f.host); err != nil {
		return err
	}
	if !slices.Contains(session.ListableStates, f.state) {
		return usagef("--state %q: give one of %s (done and queued URLs cannot be listed)", f.state, strings.Join(session.ListableStates, ", "))
	}
	if f.limit < 1 || f.limit > session.MaxURLsPage {
		return usagef("--limit %d: must be between 1 and %d", f.limit, session.MaxURLsPage)
	}
	return nil
}

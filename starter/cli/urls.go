package cli

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/session"
)

// URLsFunc asks every scheduler for a page of one host's URLs in one
// state and merges them; session.Client.URLs in production.
type URLsFunc func(ctx context.Context, addrs []string, token, key string, q session.URLQuery) (session.URLPage, error)

type urlsFlags struct {
	host, state, after, log string
	limit                   int
	json                    bool
}

func (a views) urlsCommand() *cobra.Command {
	var f urlsFlags
	cmd := &cobra.Command{
		Use:   "urls ID --host H --state S [--limit N] [--after URL]",
		Short: "List the URLs of one host of a campaign in one state (queued, leased, held, parked, failed or done), a page at a time",
		Long: `urls asks every scheduler (DROVER_SCHEDULER) for the URLs of one host of a
running campaign in one state, and prints them one a line, in URL order:

  queued   queued (a seed or a link) and not yet held, leased or settled by
           any scheduler: waiting in RabbitMQ, from each scheduler's index
           of the URLs it queued
  leased   a fetcher has it now
  held     a scheduler holds it, waiting for the host's turn
  parked   parked for a later try (a retry, a host far behind), its park
           message with a scheduler's park mover: the first due of each
           park queue (256 messages of each at most), not the rest
  failed   settled without a page, or with an error status (also after the
           campaign ended, until its ID runs again)

  done     fetched and stored (any status), read from the campaign's crawl
           log (start --crawl-log DIR), not from the schedulers: during the
           run and after it

Queued URLs come from the index each scheduler keeps of the URLs it queued
(one entry per URL, in its seen store); a URL one scheduler queued and
another leased or recorded is not listed, as every scheduler is asked about
each page. A page of them reads at most 16,000 entries of a host's index: a
host whose URLs are mostly done gets short pages, each with its "more" line.
Done URLs need the crawl log because the schedulers keep only their hashes;
each page of them reads the run's whole log (a second or so per million
lines), where the workers' DIR can be read (--log names it when it is
mounted elsewhere). A URL is listed once a worker logged its page, a moment
before its scheduler records it.

A page holds at most --limit URLs (1-1000, default 100); when there are more,
it says how to ask for the next one (--after the page's last URL). Each
scheduler copies only what it holds of the host, so the command never stalls
a scheduler. HOST is a host name as URLs have it (news.example), without
scheme, port or path.`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return a.listURLs(cmd.Context(), args[0], f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.host, "host", "", "the host (required)")
	fl.StringVar(&f.state, "state", "", "queued, leased, held, parked, failed or done (required)")
	fl.StringVar(&f.log, "log", "", "done: the crawl log directory (default: the campaign's crawl_log)")
	fl.IntVar(&f.limit, "limit", 100, fmt.Sprintf("URLs in a page (1-%d)", session.MaxURLsPage))
	fl.StringVar(&f.after, "after", "", "list the URLs after this one (the last of the previous page)")
	fl.BoolVar(&f.json, "json", false, `print the page as JSON: {"urls": [...], "next": URL}`)
	return cmd
}

func (f urlsFlags) check() error {
	if err := checkHostName(f.host); err != nil {
		return err
	}
	if f.state != session.URLDone && !slices.Contains(session.ListableStates, f.state) {
		return usagef("--state %q: give one of %s or done", f.state, strings.Join(session.ListableStates, ", "))
	}
	if f.log != "" && f.state != session.URLDone {
		return usagef("--log reads the crawl log, which only --state done does")
	}
	if f.limit < 1 || f.limit > session.MaxURLsPage {
		return usagef("--limit %d: must be between 1 and %d", f.limit, session.MaxURLsPage)
	}
	return nil
}

// doneURLs is a page of the URLs of q.Host that the campaign's latest run
// stored, in URL order, from its crawl log (under dir, or the campaign's
// crawl_log): every line of the run is read, and only the host's URLs
// kept.
func (a views) doneURLs(ctx context.Context, id string, q session.URLQuery, dir string) (session.URLPage, error) {
	key, root := id, dir
	v, verr := a.view(ctx, id)
	if verr == nil {
		key = v.Frontier
		if root == "" {
			root = v.CrawlLog
		}
	} else if dir == "" {
		return session.URLPage{}, verr
	}
	if root == "" {
		return session.URLPage{}, failf("campaign %s keeps no crawl log, which done URLs are listed from (start it with --crawl-log DIR), or name its directory with --log", id)
	}
	host := strings.ToLower(q.Host)
	done := map[string]bool{}
	logDir := crawllog.Dir(root, key)
	files, _, err := crawllog.ReadDir(logDir, func(l crawllog.Line) {
		if l.Outcome != crawllog.OutcomePage || done[l.URL] {
			return
		}
		if u, err := url.Parse(l.URL); err == nil && strings.ToLower(u.Hostname()) == host {
			done[l.URL] = true
		}
	})
	if err != nil {
		return session.URLPage{}, failf("%v", err)
	}
	if len(files) == 0 {
		hint := "run urls where the workers' crawl_log can be read, or name it with --log"
		if verr != nil && !strings.Contains(id, campaign.RunSep) {
			hint = fmt.Sprintf("Temporal could not say which run is the latest (%v): give the run's key, ID%sRUN, as the logs' directory names it", verr, campaign.RunSep)
		}
		return session.URLPage{}, failf("no crawl log files in %s: %s", logDir, hint)
	}
	return q.Cut(slices.Sorted(maps.Keys(done))), nil
}

// listURLs prints a page of one host's URLs in one state (`urls`).
func (a views) listURLs(ctx context.Context, id string, f urlsFlags) error {
	if a.URLs == nil && f.state != session.URLDone {
		return failf("no scheduler client configured")
	}
	ctx, cancel := context.WithTimeout(ctx, urlTimeout)
	defer cancel()
	q := session.URLQuery{Host: f.host, State: f.state, After: f.after, Limit: f.limit}
	var page session.URLPage
	var err error
	if f.state == session.URLDone {
		if page, err = a.doneURLs(ctx, id, q, f.log); err != nil {
			return err
		}
	} else {
		page, err = a.URLs(ctx, a.Env.Schedulers, a.Env.Token, a.frontierKey(ctx, id), q)
	}
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
}

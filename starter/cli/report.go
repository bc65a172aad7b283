package cli

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
)

// ReportView is `starter report --json`'s output: the crawl log's report
// and what `status --json` counts beside it.
type ReportView struct {
	crawllog.Report
	// Status is the campaign's own counts (`status --json`); nil when
	// Temporal could not be asked (--log given).
	Status *ReportStatus `json:"status,omitempty"`
	// Agrees: the log's pages and failed equal Status's pages_fetched and
	// pages_failed. A running campaign's counts trail its log by a
	// heartbeat.
	Agrees bool `json:"agrees"`
}

// ReportStatus is what `status --json` says of the campaign's pages.
type ReportStatus struct {
	State          string `json:"state"`
	PagesFetched   int64  `json:"pages_fetched"`
	PagesFailed    int64  `json:"pages_failed"`
	PagesUnchanged int64  `json:"pages_unchanged"`
}

func (a *App) reportCommand() *cobra.Command {
	var asJSON bool
	var dir string
	var top int
	cmd := &cobra.Command{
		Use:   "report ID",
		Short: "Summarise a campaign from its crawl log: by host, MIME type, status and seed",
		Long: `Summarise a campaign from its crawl log (start --crawl-log DIR): attempts,
pages, failures, errors, robots.txt fetches and bytes, in total and by host,
MIME type, status and seed, beside the campaign's own counts (status --json).

It reads the crawl log files of the campaign's latest run (DIR/ID~RUN/*.jsonl),
so it runs where the workers' DIR can be read; --log names DIR when it is
mounted elsewhere, or when Temporal cannot be reached (give ID~RUN then).`,
		Args: exactArgs("ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			rv, err := a.report(cmd, args[0], dir)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(a.Out, rv)
			}
			renderReport(a.Out, rv, top)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().StringVar(&dir, "log", "", "the crawl log directory (default: the campaign's crawl_log)")
	cmd.Flags().IntVar(&top, "top", 20, "rows shown per table, most attempts first (0: all)")
	return cmd
}

func (a *App) report(cmd *cobra.Command, id, dir string) (ReportView, error) {
	var rv ReportView
	key, root := id, dir
	v, verr := a.view(cmd.Context(), id)
	if verr == nil {
		key = v.Frontier
		if root == "" {
			root = v.CrawlLog
		}
		rv.Status = &ReportStatus{State: v.State, PagesFetched: v.PagesFetched, PagesFailed: v.PagesFailed, PagesUnchanged: v.PagesUnchanged}
	} else if dir == "" {
		return rv, verr
	}
	if root == "" {
		return rv, failf("campaign %s keeps no crawl log (start it with --crawl-log DIR), or name its directory with --log", id)
	}
	rep, err := crawllog.Summarize(root, key)
	if err != nil {
		return rv, failf("%v", err)
	}
	if len(rep.Files) == 0 {
		return rv, failf("no crawl log files in %s: run report where the workers' crawl_log can be read, or name it with --log", rep.Dir)
	}
	rv.Report = rep
	rv.Agrees = rv.Status != nil && rep.Total.Pages == rv.Status.PagesFetched && rep.Total.Failed == rv.Status.PagesFailed
	return rv, nil
}

func renderReport(w io.Writer, rv ReportView, top int) {
	fmt.Fprintf(w, "Campaign %s: crawl log %s (%d files", rv.Campaign, rv.Dir, len(rv.Files))
	if rv.Unreadable > 0 {
		fmt.Fprintf(w, ", %d unreadable lines", rv.Unreadable)
	}
	fmt.Fprintln(w, ")")
	if s := rv.Status; s != nil {
		verdict := "agrees"
		switch {
		case rv.Agrees:
		case s.State == campaign.StateRunning || s.State == campaign.StatePaused:
			verdict = "DIFFERS (a running campaign's counts trail its log by a heartbeat)"
		default:
			verdict = "DIFFERS (a worker killed mid-crawl leaves pages in the log that its heartbeats never counted)"
		}
		fmt.Fprintf(w, "Status (%s): %d pages fetched, %d failed: the log %s\n", s.State, s.PagesFetched, s.PagesFailed, verdict)
	}
	tables := []struct {
		title string
		rows  []crawllog.Row
	}{
		{"TOTAL", []crawllog.Row{{Key: "all", Totals: rv.Total}}},
		{"HOST", rv.ByHost}, {"MIME TYPE", rv.ByMIME}, {"STATUS", rv.ByStatus}, {"SEED", rv.BySeed},
	}
	for _, t := range tables {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "%s\tATTEMPTS\tPAGES\tFAILED\tERRORS\tROBOTS\tDEAD\tDROPPED\tBYTES\t\n", t.title)
		for i, r := range t.rows {
			if top > 0 && i == top {
				fmt.Fprintf(tw, "(%d more)\t\t\t\t\t\t\t\t\t\n", len(t.rows)-top)
				break
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", r.Key, r.Attempts, r.Pages, r.Failed, r.Errors, r.Robots, r.DeadLettered, r.Dropped, r.Bytes)
		}
		tw.Flush()
	}
}

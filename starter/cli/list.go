package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-crawl/drover/workflows"
)

// listEntry is one campaign in `list --json`.
type listEntry struct {
	ID             string     `json:"id"`
	RunID          string     `json:"run_id"`
	State          string     `json:"state"`
	PagesFetched   int64      `json:"pages_fetched"`
	StartTime      time.Time  `json:"start_time"`
	CloseTime      *time.Time `json:"close_time,omitempty"`
	WorkflowStatus string     `json:"workflow_status"`
}

// listQuery selects the Campaign workflows in the namespace.
var listQuery = fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowName)

func (a *App) listCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List campaigns, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := a.temporal(ctx)
			if err != nil {
				return err
			}
			exs, err := c.List(ctx, listQuery)
			if err != nil {
				return failf("cannot list campaigns: %v", err)
			}
			entries := make([]listEntry, 0, len(exs))
			for _, ex := range exs {
				e := listEntry{ID: ex.ID, RunID: ex.RunID, State: stateOf(ex.Status, ex.State),
					PagesFetched: ex.PagesFetched, StartTime: ex.StartTime, WorkflowStatus: ex.Status}
				if !ex.CloseTime.IsZero() {
					t := ex.CloseTime
					e.CloseTime = &t
				}
				if ex.DecodeError != "" {
					fmt.Fprintf(a.Err, "campaign %s: %s\n", ex.ID, ex.DecodeError)
				}
				entries = append(entries, e)
			}
			if asJSON {
				return writeJSON(a.Out, entries)
			}
			if len(entries) == 0 {
				fmt.Fprintln(a.Out, "no campaigns")
				return nil
			}
			tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tPAGES\tSTARTED\tSTATUS")
			for _, e := range entries {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", e.ID, e.State, e.PagesFetched,
					e.StartTime.Local().Format(time.DateTime), e.WorkflowStatus)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the campaigns as JSON")
	return cmd
}

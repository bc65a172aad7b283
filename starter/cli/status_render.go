package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-crawl/drover/workflows"
)

// renderView prints the human view of a campaign.
// renderNotes says which part of the view is missing, and what the counts
// are then.
func renderNotes(w io.Writer, v View, now time.Time) {
	if v.StatusError != "" {
		fmt.Fprintf(w, "  note: the workflow did not answer (%s); counts are from its search attributes\n", v.StatusError)
	}
	switch {
	case v.SchedulerError != "" && v.Closed():
		fmt.Fprintf(w, "  note: %s; failures by reason unknown\n", v.SchedulerError)
	case v.SchedulerError != "" && v.CountsAt != nil:
		fmt.Fprintf(w, "  note: %s; the counts are the workflow's last reading, from %s (%s)\n",
			v.SchedulerError, v.CountsAt.Local().Format(time.TimeOnly), since(now, *v.CountsAt))
	case v.SchedulerError != "":
		fmt.Fprintf(w, "  note: %s; the counts are the workflow's, which has read none from the schedulers yet\n", v.SchedulerError)
	}
}

// renderRevisits shows a continuous campaign's schedule: how many URLs
// wait for their next fetch, and when the first is due.
func renderRevisits(w io.Writer, v View, now time.Time) {
	st := v.Scheduler
	if st == nil || !st.Continuous {
		return
	}
	fmt.Fprintf(w, "  revisits  %d scheduled", st.Scheduled)
	if !st.NextDue.IsZero() {
		if d := st.NextDue.Sub(now); d > 0 {
			fmt.Fprintf(w, ", next due %s (in %s)", st.NextDue.Local().Format(time.DateTime), d.Round(time.Second))
		} else {
			fmt.Fprintf(w, ", next due %s (now)", st.NextDue.Local().Format(time.DateTime))
		}
	}
	fmt.Fprintf(w, ", %d released to be fetched again", st.Revisited)
	if st.ReleaseErrors > 0 {
		fmt.Fprintf(w, "; %d releases failed and will be tried again (the scheduler's log says why)", st.ReleaseErrors)
	}
	fmt.Fprintln(w)
}

func renderView(w io.Writer, v View, now time.Time) {
	fmt.Fprintf(w, "campaign %s: %s", v.ID, v.State)
	if v.Reason != "" {
		fmt.Fprintf(w, " (%s)", oneLine(v.Reason))
	}
	if v.Closed() {
		fmt.Fprintf(w, " [workflow %s]", v.WorkflowStatus)
	}
	fmt.Fprintln(w)
	if v.Alert != "" {
		fmt.Fprintf(w, "  ALERT     %s\n", oneLine(v.Alert))
	}
	if line := failureLine(v.Failure, now); line != "" && !v.Closed() {
		fmt.Fprintf(w, "  FAILING   %s\n", line)
	}
	renderQueueTrouble(w, v)
	fmt.Fprintf(w, "  started   %s (%s)\n", v.StartTime.Local().Format(time.DateTime), since(now, v.StartTime))
	if v.CloseTime != nil {
		fmt.Fprintf(w, "  ended     %s (after %s)\n", v.CloseTime.Local().Format(time.DateTime), v.CloseTime.Sub(v.StartTime).Round(time.Second))
	}
	if !v.Closed() {
		fmt.Fprintf(w, "  fetchers  %d active of %d desired, %d restarts\n", v.FetchersActive, v.FetchersDesired, v.Restarts)
	}
	if v.PagesUnchanged > 0 {
		fmt.Fprintf(w, "  pages     %d fetched (%d unchanged since the last capture: revisits), %d failed\n", v.PagesFetched, v.PagesUnchanged, v.PagesFailed)
	} else {
		fmt.Fprintf(w, "  pages     %d fetched, %d failed\n", v.PagesFetched, v.PagesFailed)
	}
	if v.SeedsAdded > 0 {
		fmt.Fprintf(w, "  seeds     %d added while it ran (starter seed)\n", v.SeedsAdded)
	}
	if n := sum(v.FailedBy); n > 0 {
		fmt.Fprintf(w, "  failed    %d: %s (starter failures %s lists them)\n", n, byReason(v.FailedBy), v.ID)
		if v.FailuresNote != "" {
			fmt.Fprintf(w, "            %s\n", v.FailuresNote)
		}
	}
	if v.HostsDown != nil && *v.HostsDown > 0 {
		fmt.Fprintf(w, "  hosts     %d down: unreachable, failed for the campaign with all their URLs\n", *v.HostsDown)
	}
	if !v.Closed() {
		fmt.Fprintf(w, "  urls      %d queued, %d in flight\n", v.URLsQueued, v.URLsInFlight)
		renderRevisits(w, v, now)
	}
	renderNotes(w, v, now)
	if len(v.Fetchers) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "  FETCHER\tSTATE\tWORKER\tPAGES\tERRORS\tLAST HEARTBEAT\tATTEMPT\tRESTARTS")
		for _, f := range v.Fetchers {
			hb := "-"
			if f.LastHeartbeat != nil {
				hb = since(now, *f.LastHeartbeat)
			}
			worker := f.Worker
			if worker == "" {
				worker = "-"
			}
			fmt.Fprintf(tw, "  %d\t%s\t%s\t%d\t%d\t%s\t%d\t%d\n", f.Index, f.State, worker, f.Pages, f.Errors, hb, f.Attempt, f.Restarts)
		}
		tw.Flush()
		for _, f := range v.Fetchers {
			if f.LastFailure != "" {
				fmt.Fprintf(w, "  fetcher %d last failure: %s\n", f.Index, oneLine(f.LastFailure))
			}
		}
	}
	if v.WebUI != "" {
		fmt.Fprintf(w, "\n  Web UI: %s\n", v.WebUI)
	} else {
		fmt.Fprintf(w, "\n  Web UI: unknown; set TEMPORAL_UI_URL to link it\n")
	}
}

// failureLine tells fetchers that keep failing in one line: how many,
// since when, the reason in words and when the campaign will fail; empty
// when none is failing now.
func failureLine(f *workflows.FleetFailure, now time.Time) string {
	if f == nil || f.Consecutive == 0 {
		return ""
	}
	line := fmt.Sprintf("%d of %d fetchers, %d failures in a row since %s (%s): %s",
		f.Failing, f.Desired, f.Consecutive, f.Since.Local().Format(time.TimeOnly), since(now, f.Since), oneLine(f.Text()))
	if !f.FailAt.IsZero() {
		line += fmt.Sprintf("; the campaign fails at %s unless a page is fetched", f.FailAt.Local().Format(time.TimeOnly))
	}
	return line
}

// renderQueueTrouble prints what is wrong with the campaign's queues: a
// scheduler that cannot consume them, shard queues that vanished, and
// consumers no scheduler answers for.
func renderQueueTrouble(w io.Writer, v View) {
	if v.ConsumeError != "" {
		fmt.Fprintf(w, "  QUEUES    a scheduler cannot consume the campaign's queues (it keeps trying): %s\n", oneLine(v.ConsumeError))
	}
	if len(v.Vanished) > 0 {
		fmt.Fprintf(w, "  LOST      shard queue(s) %s vanished from RabbitMQ while the campaign ran: the URLs they held are lost (declared again, empty, for the links found later; `failures` lists them as vanished)\n", strings.Join(v.Vanished, ", "))
	}
	if v.ConsumersUnaccounted > 0 && !v.Closed() {
		fmt.Fprintf(w, "  QUEUES    RabbitMQ counts %d consumer(s) of the shards that no scheduler in DROVER_SCHEDULER answers for; the campaign cannot drain until they go (a scheduler missing from the list, or a connection RabbitMQ has not yet seen end)\n", v.ConsumersUnaccounted)
	}
}

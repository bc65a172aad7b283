package workflows

import (
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// status is what the workflow knows now.
func (r *run) status() Status {
	fs := make([]FetcherStatus, len(r.st.Fetchers))
	copy(fs, r.st.Fetchers)
	for i := range fs {
		fs[i].Running = i < len(r.slots) && r.slots[i].running && !r.slots[i].stopping
	}
	return Status{
		ID:              r.id,
		State:           r.st.State,
		FetchersDesired: r.st.FetchersDesired,
		FetchersActive:  r.fleet().active(),
		Fetchers:        fs,
		PagesFetched:    r.st.PagesFetched,
		PagesFailed:     r.st.PagesFailed,
		URLsQueued:      r.st.URLsQueued,
		URLsInFlight:    r.st.URLsInFlight,
		CountsAt:        r.st.CountsAt,
		Restarts:        r.st.Restarts,
		StartedAt:       r.st.StartedAt,
		Reason:          r.st.Reason,
		Alert:           r.st.Alert,
		Failure:         r.fleet().failureStatus(),
		Run:             r.st.Run,
		Frontier:        r.cfg.FrontierKey(),
		CrawlLog:        r.cfg.CrawlLog,
		CloseError:      r.closeErr,
		SeedsAdded:      r.st.SeedsAdded,
	}
}

// publish shows the state in the Web UI: the current details (which a new
// run after continue-as-new must set again) and the search attributes,
// upserted only when they change, since each upsert is a history event.
func (r *run) publish() {
	workflow.SetCurrentDetails(r.ctx, r.details())
	if r.upserted.done && r.upserted.state == r.st.State && r.upserted.pages == r.st.PagesFetched {
		return
	}
	var updates []temporal.SearchAttributeUpdate
	if !r.upserted.done || r.upserted.state != r.st.State {
		updates = append(updates, CampaignStateKey.ValueSet(r.st.State))
	}
	if !r.upserted.done || r.upserted.pages != r.st.PagesFetched {
		updates = append(updates, PagesFetchedKey.ValueSet(r.st.PagesFetched))
	}
	if err := workflow.UpsertTypedSearchAttributes(r.ctx, updates...); err != nil {
		workflow.GetLogger(r.ctx).Warn("search attributes not upserted (are CampaignState and PagesFetched registered?)", "err", err)
		return
	}
	r.upserted.done, r.upserted.state, r.upserted.pages = true, r.st.State, r.st.PagesFetched
}

// details renders the current details in Temporal's markdown.
func (r *run) details() string {
	var b strings.Builder
	fmt.Fprintf(&b, "**Campaign `%s`: %s**", r.id, r.st.State)
	if r.st.Run > 0 {
		fmt.Fprintf(&b, " (run %d)", r.st.Run+1)
	}
	b.WriteString("\n\n")
	if r.st.Reason != "" {
		fmt.Fprintf(&b, "- reason: %s\n", r.st.Reason)
	}
	if r.st.Alert != "" {
		fmt.Fprintf(&b, "- **alert**: %s\n", r.st.Alert)
	}
	if f := r.fleet().failureStatus(); f != nil && f.Consecutive > 0 {
		fmt.Fprintf(&b, "- **fetchers failing**: %d of %d, %d failures in a row since %s: %s\n",
			f.Failing, f.Desired, f.Consecutive, f.Since.UTC().Format("15:04:05 UTC"), f.Text())
		if !f.FailAt.IsZero() {
			fmt.Fprintf(&b, "- **fails at %s** unless a page is fetched (fail_after %s)\n",
				f.FailAt.UTC().Format("15:04:05 UTC"), r.cfg.FailAfterDuration())
		}
	}
	fmt.Fprintf(&b, "- fetchers: %d active of %d desired, %d restarts\n", r.fleet().active(), r.st.FetchersDesired, r.st.Restarts)
	fmt.Fprintf(&b, "- pages: %d fetched, %d failed; URLs: %d queued, %d in flight\n",
		r.st.PagesFetched, r.st.PagesFailed, r.st.URLsQueued, r.st.URLsInFlight)
	fmt.Fprintf(&b, "- seeds: %s%s\n", list(r.cfg.Seeds, 5), seedsMore(r.cfg.SeedsFile, r.st.SeedsAdded))
	fmt.Fprintf(&b, "- sinks: %s\n", list(r.cfg.Sinks, 5))
	fmt.Fprintf(&b, "- started: %s\n", r.st.StartedAt.UTC().Format("2006-01-02 15:04:05 UTC"))
	return b.String()
}

// list shows at most n items, then how many more there are.
func list(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s (+%d more)", strings.Join(items[:n], ", "), len(items)-n)
}

// seedsMore is what the details add to the config's seeds: the list the
// campaign was started from, and the seeds added since.
func seedsMore(file string, added int64) string {
	var s string
	if file != "" {
		s += "; streamed from " + file
	}
	if added > 0 {
		s += fmt.Sprintf("; %d added while it ran", added)
	}
	return s
}

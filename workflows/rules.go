package workflows

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// Live rules: `starter exclude`, `starter include` and `starter host` (or
// the Update from the `temporal` CLI) add to a running campaign's
// campaign.Rules. The workflow records them in its config (so
// continue-as-new and every fetcher session started later carry them) and
// sends them to every scheduler (RulesActivity); the Update returns once
// every scheduler applies them, and a scheduler applies an exclude only
// once no lease of a URL it matches is out: from then on no matching URL
// is fetched. A scheduler pushes an include to the running fetcher
// sessions that take pushed rules; the workflow restarts its sessions
// only when one does not (RulesOutput).
const (
	// UpdateRules takes RulesRequest and returns RulesResult.
	UpdateRules = "rules"
	// RulesActivity gives the schedulers the campaign's rules (RulesInput).
	RulesActivity = "SetRules"
)

// RulesRequest is one change: an exclude, a host rule, or both.
type RulesRequest struct {
	// Exclude is a regular expression: matching URLs are no longer
	// fetched, and those queued or held are settled as "excluded".
	Exclude string `json:"exclude,omitempty"`
	// Include is a regular expression: matching URLs are in scope from
	// then on (found as links in the pages whose links are read after
	// it: the schedulers push it to the running fetcher sessions).
	Include string `json:"include,omitempty"`
	// Host sets one host's delay, concurrency or block, from its next
	// lease on.
	Host *campaign.HostRule `json:"host,omitempty"`
}

// RulesResult is the campaign's rules once the change applies everywhere.
type RulesResult struct {
	Rules campaign.Rules `json:"rules"`
}

// RulesOutput is what RulesActivity says of the running fetcher sessions.
type RulesOutput struct {
	// Pushed: every scheduler sent the rules to the sessions that take
	// them while they run (false from an activity or a scheduler from
	// before pushed rules).
	Pushed bool
	// Stale counts the sessions that do not take them: they read an
	// include only when they start again.
	Stale int
}

// RulesInput is the input of RulesActivity: the campaign's frontier key
// and its rules.
type RulesInput struct {
	Campaign string
	Rules    campaign.Rules
}

// rulesWithin bounds RulesActivity: a scheduler answers once no lease of
// an excluded URL is out, at most the longest a lease lives (a
// scheduler's MaxLease, 5 minutes by default).
const rulesWithin = 6 * time.Minute

func (r *run) registerRules() error {
	return workflow.SetUpdateHandlerWithOptions(r.root, UpdateRules, r.onRules,
		workflow.UpdateHandlerOptions{Validator: r.validateRules})
}

func (r *run) validateRules(_ workflow.Context, req RulesRequest) error {
	if req.Exclude == "" && req.Include == "" && req.Host == nil {
		return errors.New("rules: give an exclude, an include or a host rule")
	}
	for _, p := range [][2]string{{"exclude", req.Exclude}, {"include", req.Include}} {
		if _, err := regexp.Compile(p[1]); err != nil {
			return fmt.Errorf("%s %q: not a valid regular expression: %v", p[0], p[1], err)
		}
	}
	if err := r.nextRules(req).Validate(); err != nil {
		return err
	}
	if r.ending != "" || r.st.State == campaign.StateStopping || isEnded(r.st.State) {
		return fmt.Errorf("campaign %s is %s: its rules can no longer change", r.id, r.st.State)
	}
	return nil
}

// versionPushedRules is the workflow.GetVersion change ID of leaving the
// fetcher sessions running on a live include that every scheduler pushed
// to them.
const versionPushedRules = "pushed-rules"

// mustRotate says whether an include must restart the running sessions:
// always in a run whose include was handled before pushed rules, and
// whenever a scheduler could not be reached, cannot push, or has sessions
// that do not take pushed rules. A restart cancels the requests under
// way, which are then made again: pushed rules cost no request.
//
// The change ID is needed even though an older activity's result reads
// as not pushed: during a rolling upgrade a new activity may answer an
// older workflow task, which restarted the sessions whatever it said;
// replayed on this code without the ID, that history would not restart
// them (TestReplayRecordedHistory replays one recorded before,
// campaign_history_include_before_pushed_rules.json).
func mustRotate(ctx workflow.Context, out RulesOutput, err error) bool {
	if workflow.GetVersion(ctx, versionPushedRules, workflow.DefaultVersion, 1) < 1 {
		return true
	}
	return err != nil || !out.Pushed || out.Stale > 0
}

func (r *run) nextRules(req RulesRequest) campaign.Rules {
	next := r.cfg.Live
	if req.Exclude != "" {
		next = next.WithExclude(req.Exclude)
	}
	if req.Include != "" {
		next = next.WithInclude(req.Include)
	}
	if req.Host != nil {
		next = next.WithHost(*req.Host)
	}
	return next
}

func (r *run) onRules(ctx workflow.Context, req RulesRequest) (RulesResult, error) {
	r.cfg.Live = r.nextRules(req)
	rules := r.cfg.Live
	actx := workflow.WithActivityOptions(ctx, smallOptions(rulesWithin, 5))
	var out RulesOutput
	err := workflow.ExecuteActivity(actx, RulesActivity, RulesInput{Campaign: r.cfg.FrontierKey(), Rules: rules}).Get(ctx, &out)
	if req.Include != "" && mustRotate(ctx, out, err) {
		// A session that does not take pushed rules reads the scope when
		// it starts: the running sessions end (their leases go back) and
		// start again with it.
		r.events.SendAsync(event{kind: evRotate})
	}
	if err != nil {
		return RulesResult{Rules: rules}, fmt.Errorf("rules version %d are the campaign's, but not every scheduler took them (they get them with their next fetcher session; try again to be sure): %w", rules.Version, err)
	}
	return RulesResult{Rules: rules}, nil
}

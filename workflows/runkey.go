package workflows

import (
	"math/rand/v2"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
)

// versionRunKey is the workflow.GetVersion change ID of named runs: a
// campaign's first run names itself (campaign.Config.Run), so that its
// frontier (queues, seen marks, failure records) is its own, and a later
// run of the same ID starts from nothing even when this run's Close could
// not reach every scheduler. Runs started before replay without a name and
// keep the ID as their frontier key, continue-as-new included.
const versionRunKey = "run-key"

// MemoFrontier is the memo that holds a campaign's frontier key
// (campaign.Config.FrontierKey): `starter status` and `failures` read the
// schedulers' view of this run under it.
const MemoFrontier = "DroverFrontier"

// nameRun gives a first run its name, recorded in history (a side effect,
// so a reset keeps it), and puts the frontier key in the memo.
func nameRun(ctx workflow.Context, cfg *campaign.Config, first bool) {
	if !first || workflow.GetVersion(ctx, versionRunKey, workflow.DefaultVersion, 1) < 1 {
		return
	}
	// A starter may name the run itself (to know its key before the
	// workflow runs); otherwise the workflow does.
	if cfg.Run == "" {
		var run string
		err := workflow.SideEffect(ctx, func(workflow.Context) any {
			return campaign.NewRun(time.Now(), rand.Uint64())
		}).Get(&run)
		if err != nil {
			// Only a broken data converter gets here; the ID then stays the key.
			workflow.GetLogger(ctx).Error("naming the run failed; its frontier key is the campaign ID", "err", err)
			return
		}
		cfg.Run = run
	}
	if err := workflow.UpsertMemo(ctx, map[string]any{MemoFrontier: cfg.FrontierKey()}); err != nil {
		workflow.GetLogger(ctx).Warn("frontier key not put in the memo", "err", err)
	}
}

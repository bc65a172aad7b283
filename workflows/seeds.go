package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/seedfile"
)

// Seeds added to a running campaign: `starter seed ID --file F` (or the
// Update from the `temporal` CLI). A seed list never rides in the
// workflow's input or history, only its name and its counts:
//
//   - with a Source alone, the workflow runs SeedFileActivity, which reads
//     the list (an http(s) URL, or a path the workers can read) and streams
//     it to a scheduler in batches, heartbeating its progress; a retried
//     attempt resumes after the last batch it reported, and a batch sent
//     twice is queued once (the scheduler's marks), so nothing is lost or
//     counted twice;
//   - with Streamed, the starter has streamed the list itself (a file on
//     its own machine, or its standard input) and the Update records it.
const (
	// UpdateSeed takes SeedFileRequest and returns SeedFileResult.
	UpdateSeed = "seed"
	// SeedFileActivity streams a seed list to the schedulers
	// (SeedFileInput), returning its seedfile.Counts.
	SeedFileActivity = "SeedFile"
	// QueryConfig returns the campaign's campaign.Config as it stands
	// (its run named, its live rules in it): what `starter seed` streams
	// with.
	QueryConfig = "config"
)

// SeedFileRequest is one seed list added to a running campaign.
type SeedFileRequest struct {
	// Source names the list: an http(s) URL, or a path the campaign's
	// workers can read; "-" when the starter streamed its standard input.
	Source string `json:"source"`
	// Streamed are the counts of a list the starter streamed itself; nil
	// has the workflow stream Source (SeedFileActivity).
	Streamed *seedfile.Counts `json:"streamed,omitempty"`
}

// SeedFileResult is what the list added.
type SeedFileResult struct {
	Source string          `json:"source"`
	Counts seedfile.Counts `json:"counts"`
	// SeedsAdded is every seed added to the campaign while it ran, this
	// list's included.
	SeedsAdded int64 `json:"seeds_added"`
}

// SeedFileInput is the input of SeedFileActivity.
type SeedFileInput struct {
	Config campaign.Config
	Source string
}

// seedFileOptions: a million seeds stream in a few minutes; an attempt
// whose worker died is retried at its heartbeat timeout, from its last
// progress.
func seedFileOptions() workflow.ActivityOptions {
	o := smallOptions(2*time.Hour, 10)
	o.RetryPolicy.NonRetryableErrorTypes = []string{"SeedListUnreadable", "SeedRefused"}
	return o
}

func (r *run) registerSeeds() error {
	if err := workflow.SetQueryHandler(r.root, QueryConfig, func() (campaign.Config, error) {
		return r.cfg, nil
	}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(r.root, UpdateSeed, r.onSeed,
		workflow.UpdateHandlerOptions{Validator: r.validateSeed})
}

func (r *run) validateSeed(_ workflow.Context, req SeedFileRequest) error {
	if req.Source == "" {
		return errors.New(`seed: give the seed list's source ({"source": "https://host/seeds.gz"}: a URL, or a path the workers can read)`)
	}
	if req.Source == "-" && req.Streamed == nil {
		return errors.New("seed: - (standard input) is only for the starter, which streams it itself")
	}
	if r.ending != "" || r.st.State == campaign.StateStopping || isEnded(r.st.State) {
		return fmt.Errorf("campaign %s is %s: it takes no more seeds", r.id, r.st.State)
	}
	return nil
}

func (r *run) onSeed(ctx workflow.Context, req SeedFileRequest) (SeedFileResult, error) {
	res := SeedFileResult{Source: req.Source}
	if req.Streamed != nil {
		res.Counts = *req.Streamed
	} else {
		// The frontier may look drained while the list is read: the
		// campaign does not end meanwhile (monitored).
		r.seeding++
		actx := workflow.WithActivityOptions(ctx, seedFileOptions())
		err := workflow.ExecuteActivity(actx, SeedFileActivity, SeedFileInput{Config: r.cfg, Source: req.Source}).Get(ctx, &res.Counts)
		r.seeding--
		if err != nil {
			var ae *temporal.ApplicationError
			if errors.As(err, &ae) {
				_ = ae.Details(&res.Counts)
			}
			r.st.SeedsAdded += res.Counts.Seeded
			res.SeedsAdded = r.st.SeedsAdded
			return res, fmt.Errorf("seeding from %s stopped after line %d (%d seeds queued; run it again: seeds already queued are skipped): %w",
				req.Source, res.Counts.Lines, res.Counts.Seeded, err)
		}
	}
	r.st.SeedsAdded += res.Counts.Seeded
	res.SeedsAdded = r.st.SeedsAdded
	workflow.GetLogger(ctx).Info("seeds added", "source", req.Source, "seeded", res.Counts.Seeded,
		"known", res.Counts.Known, "invalid", res.Counts.Invalid, "refused", res.Counts.Refused)
	return res, nil
}

package frontier

import (
	"fmt"
	"slices"

	"github.com/drover-crawl/drover/campaign"
)

// The runs of a campaign ID. Each run of an ID has its own frontier key
// (campaign.Config.FrontierKey): its own queues, seen marks, failure
// records and actor. A run that starts again from nothing under an ID
// used before therefore cannot find the marks of the last run and take
// its seeds for done, whether or not that run's Close reached this
// scheduler. Temporal runs one run of an ID at a time, so when a run
// starts here every earlier one is over, and what it left is removed:
// that is retireEarlier, called before a run's seeds are published or its
// actor is made.

// otherRuns lists the frontier keys of cfg's campaign ID, other than
// cfg's, that this scheduler knows: its actors, and its store's marks and
// failure records.
func (s *Server) otherRuns(cfg campaign.Config) ([]string, error) {
	key := cfg.FrontierKey()
	keys, err := s.store.Campaigns(cfg.ID, campaign.RunSep)
	if err != nil {
		return nil, fmt.Errorf("listing the runs of campaign %s: %w", cfg.ID, err)
	}
	s.mu.Lock()
	for k := range s.campaigns {
		if campaign.KeyID(k) == cfg.ID && !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	return slices.DeleteFunc(keys, func(k string) bool { return k == key }), nil
}

// retireEarlier removes what the earlier runs of cfg's campaign ID left on
// this scheduler, as their own Close would have: the actor stops (what it
// held goes back to queues about to go) and is refused from now on, the
// queues are deleted, and the seen marks and failure records dropped.
// When this scheduler knows a later run, cfg's run is the one that is
// over (a late fetcher or Seed of it): refused, and nothing is removed.
// The caller holds createMu.
func (s *Server) retireEarlier(cfg campaign.Config) error {
	key := cfg.FrontierKey()
	others, err := s.otherRuns(cfg)
	if err != nil {
		return err
	}
	for _, k := range others {
		if campaign.RunAfter(k, key) {
			return fmt.Errorf("campaign %s: a later run of it (%s) started on this scheduler, so run %s is over", cfg.ID, k, key)
		}
	}
	for _, k := range others {
		s.mu.Lock()
		_, live := s.campaigns[k]
		s.mu.Unlock()
		if _, err := s.closeCampaign(k, true, true); err != nil {
			return fmt.Errorf("removing the earlier run %s of campaign %s: %w", k, cfg.ID, err)
		}
		if err := s.store.DropFailures(k); err != nil {
			return fmt.Errorf("removing the earlier run %s of campaign %s: %w", k, cfg.ID, err)
		}
		s.log.Info("an earlier run of the campaign removed (queues, seen marks, failure records)",
			"campaign", k, "new_run", key, "was_open_here", live)
	}
	return nil
}

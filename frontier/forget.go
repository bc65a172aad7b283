package frontier

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// forgetHistory drops lineage's fetch history from the seen store
// (`starter forget`): its URLs are fetched in full by the next run that
// reads it, and its history no longer takes disk. It refuses while a
// campaign open here reads or writes the lineage (its run would go on
// writing it, and would find some URLs' history and not others'), or one
// closing here still records its last outcomes; no campaign is made while
// it looks and drops. probe: it only looks.
func (s *Server) forgetHistory(lineage string, probe bool) error {
	if lineage == "" {
		return errors.New("forget: name a lineage (a campaign ID)")
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	var users []string
	uses := func(a *campaignActor) bool { return a.lineage == lineage && (a.cfg.From != "" || !a.cfg.NoHistory) }
	s.mu.Lock()
	for key, a := range s.campaigns {
		if uses(a) {
			users = append(users, key)
		}
	}
	for a := range s.closing {
		if uses(a) {
			users = append(users, a.key+" (closing)")
		}
	}
	s.mu.Unlock()
	if len(users) > 0 {
		slices.Sort(users)
		return fmt.Errorf("lineage %s is in use on scheduler %s by campaign %s: stop it (or wait for its end) first",
			lineage, s.cfg.Name, strings.Join(users, ", "))
	}
	if probe {
		return nil
	}
	if err := s.store.DropHistory(lineage); err != nil {
		return fmt.Errorf("forget lineage %s: %w", lineage, err)
	}
	s.log.Info("fetch history forgotten", "lineage", lineage)
	return nil
}

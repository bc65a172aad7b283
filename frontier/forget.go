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
// writing it, and would find some URLs' history and not others'); no
// campaign is made while it looks and drops.
func (s *Server) forgetHistory(lineage string) error {
	if lineage == "" {
		return errors.New("forget: name a lineage (a campaign ID)")
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	var users []string
	s.mu.Lock()
	for key, a := range s.campaigns {
		if a.lineage == lineage && (a.cfg.From != "" || !a.cfg.NoHistory) {
			users = append(users, key)
		}
	}
	s.mu.Unlock()
	if len(users) > 0 {
		slices.Sort(users)
		return fmt.Errorf("lineage %s is read or written by campaign %s, open on scheduler %s: stop it (or wait for its end) first",
			lineage, strings.Join(users, ", "), s.cfg.Name)
	}
	if err := s.store.DropHistory(lineage); err != nil {
		return fmt.Errorf("forget lineage %s: %w", lineage, err)
	}
	s.log.Info("fetch history forgotten", "lineage", lineage)
	return nil
}

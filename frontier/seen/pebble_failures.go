package seen

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/drover-crawl/drover/failure"
)

// Failure records of a Pebble: key 'f', the campaign, 0x00, the URL's
// hash; value the failure.Record as JSON. They are few beside the marks (one
// per URL that did not become a page), so Failures scans the campaign's
// span and filters by reason.

// RecordFailures implements Store.
func (s *Pebble) RecordFailures(c string, fs []failure.Record) error {
	if len(fs) == 0 {
		return checkCampaign(c)
	}
	s.fmu.Lock()
	defer s.fmu.Unlock()
	return s.use(c, func(db *pebble.DB) error {
		batch := map[Key]failure.Record{}
		for _, f := range fs {
			k := KeyOf(f.URL)
			old, ok := batch[k]
			if !ok {
				err := s.get(db, storeKey(nil, kindFailure, c, k), func(v []byte) {
					if json.Unmarshal(v, &old) != nil || old.URL != f.URL {
						old = failure.Record{} // unreadable, or another URL of the same hash
					}
				})
				if err != nil {
					return err
				}
			}
			batch[k] = old.Merge(f)
		}
		b := db.NewBatch()
		defer b.Close()
		for k, f := range batch {
			v, err := json.Marshal(f)
			if err != nil {
				return fmt.Errorf("seen store: %w", err)
			}
			if err := b.Set(storeKey(nil, kindFailure, c, k), v, nil); err != nil {
				return fmt.Errorf("seen store: %w", err)
			}
		}
		if err := b.Commit(s.wo); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		return nil
	}, func(mem *Memory) error { return mem.RecordFailures(c, fs) })
}

// Failures implements Store.
func (s *Pebble) Failures(c, reason string) (out []failure.Record, err error) {
	err = s.use(c, func(db *pebble.DB) error {
		lo, hi := span(kindFailure, c)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		for it.First(); it.Valid(); it.Next() {
			var f failure.Record
			if err := json.Unmarshal(it.Value(), &f); err != nil {
				s.log.Error("seen store: unreadable failure record skipped", "campaign", c, "key", fmt.Sprintf("%x", it.Key()), "err", err)
				continue
			}
			if reason == "" || f.Reason == reason {
				out = append(out, f)
			}
		}
		err = errors.Join(it.Error(), it.Close())
		if pebble.IsCorruptionError(err) {
			s.damaged.Store(true)
		}
		if err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		sortFailures(out)
		return nil
	}, func(mem *Memory) (err error) { out, err = mem.Failures(c, reason); return err })
	return out, err
}

// DropFailures implements Store: one range delete over the campaign's
// failure records.
func (s *Pebble) DropFailures(c string) error {
	return s.use(c, func(db *pebble.DB) error { return deleteSpan(db, s.wo, kindFailure, c) },
		func(mem *Memory) error { return mem.DropFailures(c) })
}

package seen

import (
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// A lineage's fetch history in a Pebble: key 'h', the lineage, 0x00 and
// the URL's 16-byte hash, as the marks; the value is the frontier's
// encoding of one URL's history (frontier.History). It outlives Drop, which
// removes a run's marks only: a later run of the lineage reads it.
//
// Writes go through the WAL without waiting for an fsync of their own
// (the group fsync of pebble_wal.go covers them): a history lost in a
// crash costs a full fetch of its URL next time, never a URL.
const kindHistory byte = 'h'

// History implements Store.
func (s *Pebble) History(lineage string, k Key) (out []byte, err error) {
	err = s.use(lineage, func(db *pebble.DB) error {
		return s.get(db, storeKey(nil, kindHistory, lineage, k), func(v []byte) { out = slices.Clone(v) })
	}, func(mem *Memory) (err error) { out, err = mem.History(lineage, k); return err })
	return out, err
}

// SetHistory implements Store.
func (s *Pebble) SetHistory(lineage string, keys []Key, values [][]byte) error {
	if len(keys) != len(values) {
		return fmt.Errorf("seen store: %d history keys for %d values", len(keys), len(values))
	}
	return s.use(lineage, func(db *pebble.DB) error {
		b := db.NewBatch()
		defer b.Close()
		var buf []byte
		for i, k := range keys {
			buf = storeKey(buf[:0], kindHistory, lineage, k)
			if err := b.Set(buf, values[i], nil); err != nil {
				return fmt.Errorf("seen store: %w", err)
			}
		}
		if err := b.Commit(s.wo); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		return nil
	}, func(mem *Memory) error { return mem.SetHistory(lineage, keys, values) })
}

// DropHistory implements Store: one range delete over the lineage's span.
func (s *Pebble) DropHistory(lineage string) error {
	return s.use(lineage, func(db *pebble.DB) error { return deleteSpan(db, s.wo, kindHistory, lineage) },
		func(mem *Memory) error { return mem.DropHistory(lineage) })
}

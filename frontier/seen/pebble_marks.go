// The marks of a campaign's URLs in a Pebble store (queued, done), their
// keys and their spans: lookups, writes, drops and the campaigns a store
// holds.

package seen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// mergeMarks folds merge operands of a mark into the highest one; a value
// that is not a mark counts as none.
func mergeMarks(_, value []byte) (pebble.ValueMerger, error) {
	return &maxMark{m: markOf(value)}, nil
}

type maxMark struct{ m byte }

func (mm *maxMark) MergeNewer(v []byte) error { mm.m = max(mm.m, markOf(v)); return nil }
func (mm *maxMark) MergeOlder(v []byte) error { mm.m = max(mm.m, markOf(v)); return nil }
func (mm *maxMark) Finish(bool) ([]byte, io.Closer, error) {
	return []byte{mm.m}, nil, nil
}

func markOf(v []byte) byte {
	if len(v) != 1 || v[0] > markDone {
		return 0
	}
	return v[0]
}

// span returns the bounds of a campaign's keys of one kind.
func span(kind byte, c string) (lo, hi []byte) {
	lo = append(append([]byte{kind}, c...), 0)
	hi = append(append([]byte{kind}, c...), 1)
	return lo, hi
}

func storeKey(buf []byte, kind byte, c string, k Key) []byte {
	buf = append(append(append(buf[:0], kind), c...), 0)
	return append(buf, k[:]...)
}

func checkCampaign(c string) error {
	if c == "" || strings.IndexByte(c, 0) >= 0 {
		return fmt.Errorf("seen store: bad campaign id %q", c)
	}
	return nil
}

// use runs f on the current store under the read lock, or m on the
// in-memory stand-in; a store found damaged is replaced first.
func (s *Pebble) use(c string, f func(db *pebble.DB) error, m func(*Memory) error) error {
	if err := checkCampaign(c); err != nil {
		return err
	}
	if s.damaged.Load() {
		s.replace()
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.db != nil:
		return f(s.db)
	case s.mem != nil:
		return m(s.mem)
	}
	return errClosed
}

var errClosed = errors.New("seen store: closed")

// get calls f with the value of key, if it has one. A read that fails its
// checksum finds nothing (not seen) and has the store replaced.
func (s *Pebble) get(db *pebble.DB, key []byte, f func(v []byte)) error {
	if s.damaged.Load() {
		return nil // each damaged read may cost a bit-flip search: stop reading
	}
	v, closer, err := db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		return nil
	case pebble.IsCorruptionError(err):
		if !s.damaged.Swap(true) {
			s.log.Error("SEEN STORE DAMAGED: a read failed its checksum; it answers \"not seen\" and the store is replaced", "path", s.path(), "err", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("seen store: %w", err)
	}
	f(v)
	return closer.Close()
}

// Queued implements Store. The keys are looked up in order with one
// iterator, which keeps its place in each level from one key to the next.
func (s *Pebble) Queued(c string, keys []Key) (out []bool, err error) {
	err = s.use(c, func(db *pebble.DB) error {
		out = make([]bool, len(keys))
		if len(keys) == 0 || s.damaged.Load() {
			return nil
		}
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		slices.SortFunc(order, func(a, b int) int { return bytes.Compare(keys[a][:], keys[b][:]) })
		lo, hi := span(kindMark, c)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		var buf []byte
		var verr error
		for _, i := range order {
			buf = storeKey(buf, kindMark, c, keys[i])
			if it.SeekPrefixGE(buf) && bytes.Equal(it.Key(), buf) {
				var v []byte
				if v, verr = it.ValueAndErr(); verr != nil {
					break
				}
				out[i] = markOf(v) != 0
			}
		}
		err = errors.Join(verr, it.Error(), it.Close())
		if pebble.IsCorruptionError(err) {
			if !s.damaged.Swap(true) {
				s.log.Error("SEEN STORE DAMAGED: a read failed its checksum; it answers \"not seen\" and the store is replaced", "path", s.path(), "err", err)
			}
			clear(out)
			return nil
		}
		if err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		return nil
	}, func(mem *Memory) (err error) { out, err = mem.Queued(c, keys); return err })
	return out, err
}

// Done implements Store.
func (s *Pebble) Done(c string, k Key) (done bool, err error) {
	err = s.use(c, func(db *pebble.DB) error {
		return s.get(db, storeKey(nil, kindMark, c, k), func(v []byte) { done = markOf(v) == markDone })
	}, func(mem *Memory) (err error) { done, err = mem.Done(c, k); return err })
	return done, err
}

// MarkQueued implements Store.
func (s *Pebble) MarkQueued(c string, keys []Key) error {
	return s.use(c, func(db *pebble.DB) error {
		return writeMarks(db, s.wo, c, keys, func(b *pebble.Batch, key []byte) error { return b.Merge(key, []byte{markQueued}, nil) })
	}, func(mem *Memory) error { return mem.MarkQueued(c, keys) })
}

// MarkDone implements Store.
func (s *Pebble) MarkDone(c string, keys []Key) error {
	return s.use(c, func(db *pebble.DB) error {
		return writeMarks(db, s.wo, c, keys, func(b *pebble.Batch, key []byte) error { return b.Set(key, []byte{markDone}, nil) })
	}, func(mem *Memory) error { return mem.MarkDone(c, keys) })
}

// writeMarks applies op to the mark key of each of c's keys, in one
// batch committed with wo.
func writeMarks(db *pebble.DB, wo *pebble.WriteOptions, c string, keys []Key, op func(*pebble.Batch, []byte) error) error {
	if len(keys) == 0 {
		return nil
	}
	b := db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, k := range keys {
		buf = storeKey(buf, kindMark, c, k)
		if err := op(b, buf); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
	}
	if err := b.Commit(wo); err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	return nil
}

// Drop implements Store: a range delete over each of the campaign's
// marks, revisit schedule and URL index.
func (s *Pebble) Drop(c string) error {
	return s.use(c, func(db *pebble.DB) error {
		return errors.Join(deleteSpan(db, s.wo, kindMark, c), deleteSpan(db, s.wo, kindSchedule, c), deleteSpan(db, s.wo, kindURL, c))
	},
		func(mem *Memory) error { return mem.Drop(c) })
}

// Campaigns implements Store: for each kind of key, a seek to each
// campaign of the ID in turn (its keys are one contiguous span), so it
// reads one key per campaign, not its marks.
func (s *Pebble) Campaigns(id, sep string) (out []string, err error) {
	err = s.use(id, func(db *pebble.DB) error {
		for _, kind := range []byte{kindMark, kindFailure} {
			cs, err := campaignsOf(db, kind, id, sep)
			if err != nil {
				return err
			}
			for _, c := range cs {
				if !slices.Contains(out, c) {
					out = append(out, c)
				}
			}
		}
		slices.Sort(out)
		return nil
	}, func(mem *Memory) (err error) { out, err = mem.Campaigns(id, sep); return err })
	return out, err
}

// campaignsOf lists the campaigns of one kind of key that are id or a run
// of it. Keys are kind, campaign, 0x00, hash: the campaigns of the ID sort
// between kind+id and kind+id+0xff.
func campaignsOf(db *pebble.DB, kind byte, id, sep string) ([]string, error) {
	lo := append([]byte{kind}, id...)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: append(slices.Clone(lo), 0xff)})
	if err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	var out []string
	for ok := it.First(); ok; {
		k := it.Key()[1:]
		end := bytes.IndexByte(k, 0)
		if end < 0 {
			ok = it.Next()
			continue
		}
		c := string(k[:end])
		if isRunOf(c, id, sep) {
			out = append(out, c)
		}
		ok = it.SeekGE(append(append([]byte{kind}, c...), 1))
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	return out, nil
}

// deleteSpan deletes every key of kind of c, with wo.
func deleteSpan(db *pebble.DB, wo *pebble.WriteOptions, kind byte, c string) error {
	lo, hi := span(kind, c)
	if err := db.DeleteRange(lo, hi, wo); err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	return nil
}

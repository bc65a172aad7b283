package seen

import (
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Due is a URL a continuous campaign fetches again: its key, when, and
// the frontier's message for it (opaque here).
type Due struct {
	Key Key
	At  time.Time
	Msg []byte
}

// A campaign's revisit schedule in a Pebble: key 'v', the campaign, 0x00,
// the time (8 bytes, big-endian Unix nanoseconds) and the URL's 16-byte
// hash, so that the entries due first come first; the value is the
// message. A URL has one entry: scheduling it again deletes the one
// before (Schedule's remove) in the same batch. Written with the WAL
// synced: an entry is the only record that its URL is to be fetched again
// (its delivery is acked once it is written).
const kindSchedule byte = 'v'

func scheduleKey(buf []byte, c string, at time.Time, k Key) []byte {
	buf = append(append(append(buf[:0], kindSchedule), c...), 0)
	buf = binary.BigEndian.AppendUint64(buf, uint64(max(at.UnixNano(), 0)))
	return append(buf, k[:]...)
}

// Schedule implements Store.
func (s *Pebble) Schedule(c string, add, remove []Due) error {
	return s.use(c, func(db *pebble.DB) error {
		b := db.NewBatch()
		defer b.Close()
		var buf []byte
		for _, d := range remove {
			buf = scheduleKey(buf, c, d.At, d.Key)
			if err := b.Delete(buf, nil); err != nil {
				return fmt.Errorf("seen store: %w", err)
			}
		}
		for _, d := range add {
			buf = scheduleKey(buf, c, d.At, d.Key)
			if err := b.Set(buf, d.Msg, nil); err != nil {
				return fmt.Errorf("seen store: %w", err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		return nil
	}, func(mem *Memory) error { return mem.Schedule(c, add, remove) })
}

// Entry implements Store: one key's get.
func (s *Pebble) Entry(c string, at time.Time, k Key) (msg []byte, err error) {
	err = s.use(c, func(db *pebble.DB) error {
		return s.get(db, scheduleKey(nil, c, at, k), func(v []byte) { msg = slices.Clone(v) })
	}, func(mem *Memory) (err error) { msg, err = mem.Entry(c, at, k); return err })
	return msg, err
}

// DueBy implements Store: the span's first keys, up to the one after t.
func (s *Pebble) DueBy(c string, t time.Time, limit int) (out []Due, err error) {
	err = s.use(c, func(db *pebble.DB) error {
		lo, _ := span(kindSchedule, c)
		hi := scheduleKey(nil, c, t, Key{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
		out, err = scanSchedule(db, lo, append(hi, 0), limit)
		return err
	}, func(mem *Memory) (err error) { out, err = mem.DueBy(c, t, limit); return err })
	return out, err
}

// Scheduled implements Store: a walk over the campaign's entries.
func (s *Pebble) Scheduled(c string) (n int64, next time.Time, err error) {
	err = s.use(c, func(db *pebble.DB) error {
		lo, hi := span(kindSchedule, c)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
		if err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
		for it.First(); it.Valid(); it.Next() {
			if n == 0 {
				next, _, _ = parseScheduleKey(it.Key(), len(lo))
			}
			n++
		}
		if err := it.Error(); err != nil {
			it.Close()
			return fmt.Errorf("seen store: %w", err)
		}
		return it.Close()
	}, func(mem *Memory) (err error) { n, next, err = mem.Scheduled(c); return err })
	return n, next, err
}

// scanSchedule reads up to limit schedule entries from lo to hi.
func scanSchedule(db *pebble.DB, lo, hi []byte, limit int) ([]Due, error) {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	var out []Due
	for it.First(); it.Valid() && len(out) < limit; it.Next() {
		at, k, ok := parseScheduleKey(it.Key(), len(lo))
		if !ok {
			continue
		}
		out = append(out, Due{Key: k, At: at, Msg: slices.Clone(it.Value())})
	}
	if err := it.Error(); err != nil {
		it.Close()
		return nil, fmt.Errorf("seen store: %w", err)
	}
	return out, it.Close()
}

// parseScheduleKey reads the time and URL key after a campaign's prefix
// of n bytes.
func parseScheduleKey(b []byte, n int) (time.Time, Key, bool) {
	var k Key
	if len(b) != n+8+len(k) {
		return time.Time{}, k, false
	}
	at := time.Unix(0, int64(binary.BigEndian.Uint64(b[n:]))).UTC()
	copy(k[:], b[n+8:])
	return at, k, true
}

// Schedule implements Store.
func (s *Memory) Schedule(c string, add, remove []Due) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.v == nil {
		s.v = map[string]map[string]Due{}
	}
	if s.v[c] == nil {
		s.v[c] = map[string]Due{}
	}
	for _, d := range remove {
		delete(s.v[c], string(scheduleKey(nil, c, d.At, d.Key)))
	}
	for _, d := range add {
		d.Msg = slices.Clone(d.Msg)
		s.v[c][string(scheduleKey(nil, c, d.At, d.Key))] = d
	}
	return nil
}

// Entry implements Store.
func (s *Memory) Entry(c string, at time.Time, k Key) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.v[c][string(scheduleKey(nil, c, at, k))]
	if !ok {
		return nil, nil
	}
	return slices.Clone(d.Msg), nil
}

// DueBy implements Store.
func (s *Memory) DueBy(c string, t time.Time, limit int) ([]Due, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.v[c]))
	for k, d := range s.v[c] {
		if !d.At.After(t) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var out []Due
	for _, k := range keys[:min(len(keys), limit)] {
		d := s.v[c][k]
		d.Msg = slices.Clone(d.Msg)
		out = append(out, d)
	}
	return out, nil
}

// Scheduled implements Store.
func (s *Memory) Scheduled(c string) (int64, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	for _, d := range s.v[c] {
		if next.IsZero() || d.At.Before(next) {
			next = d.At
		}
	}
	return int64(len(s.v[c])), next, nil
}

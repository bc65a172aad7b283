package frontier

import (
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"
)

// BoltSeen is a SeenStore in a local bbolt file: one bucket per campaign,
// 16-byte keys, a 1-byte mark. It survives a restart of the scheduler that
// owns it; a standby taking over a shard does not share it (it may then
// fetch a few URLs again: at-least-once, never lost).
//
// It is opened with NoSync: a process crash keeps what was written (the
// page cache survives SIGKILL); only an OS crash loses the last marks, and
// lost marks cost duplicates, never URLs (see SeenStore).
type BoltSeen struct {
	db *bolt.DB
}

// OpenBoltSeen opens (or creates) the store at path.
func OpenBoltSeen(path string) (*BoltSeen, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: 5e9, NoSync: true, NoFreelistSync: true})
	if err != nil {
		return nil, fmt.Errorf("seen store %s: %w (is another scheduler using it?)", path, err)
	}
	return &BoltSeen{db: db}, nil
}

// Queued implements SeenStore.
func (s *BoltSeen) Queued(c string, keys []Key) ([]bool, error) {
	out := make([]bool, len(keys))
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte(c))
		if b == nil {
			return nil
		}
		for i, k := range keys {
			out[i] = b.Get(k[:]) != nil
		}
		return nil
	})
	return out, err
}

func (s *BoltSeen) mark(c string, keys []Key, mark byte) error {
	return s.db.Batch(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte(c))
		if err != nil {
			return err
		}
		b.FillPercent = 0.9 // random keys: splits leave pages half full otherwise
		for _, k := range keys {
			if mark == markQueued {
				if v := b.Get(k[:]); v != nil {
					continue
				}
			}
			if err := b.Put(k[:], []byte{mark}); err != nil {
				return err
			}
		}
		return nil
	})
}

// MarkQueued implements SeenStore.
func (s *BoltSeen) MarkQueued(c string, keys []Key) error { return s.mark(c, keys, markQueued) }

// MarkDone implements SeenStore.
func (s *BoltSeen) MarkDone(c string, keys []Key) error { return s.mark(c, keys, markDone) }

// Done implements SeenStore.
func (s *BoltSeen) Done(c string, k Key) (bool, error) {
	done := false
	err := s.db.View(func(tx *bolt.Tx) error {
		if b := tx.Bucket([]byte(c)); b != nil {
			v := b.Get(k[:])
			done = len(v) == 1 && v[0] == markDone
		}
		return nil
	})
	return done, err
}

// Drop implements SeenStore.
func (s *BoltSeen) Drop(c string) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket([]byte(c)) == nil {
			return nil
		}
		return tx.DeleteBucket([]byte(c))
	})
}

// Close implements SeenStore.
func (s *BoltSeen) Close() error { return s.db.Close() }

package frontier

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A damaged store costs marks, never URLs: unknown means "not seen".
//
// At open, a store Pebble cannot open (a torn or scrambled MANIFEST,
// OPTIONS or WAL, missing tables) is moved aside and an empty one started.
// While running, a read or a compaction that fails a block checksum has the
// store replaced the same way before the next call. Pebble searches a bad
// block for a single flipped bit, a cost quadratic in the block's size, so
// the damaged store is not read again.

// moveAside renames the store that failed to open (cause) and opens an
// empty one in its place.
func (s *PebbleSeen) moveAside(cause error) (*pebble.DB, error) {
	path := s.path()
	aside := fmt.Sprintf("%s.damaged-%s", path, time.Now().UTC().Format("20060102T150405.000000Z"))
	s.log.Error("SEEN STORE DAMAGED: moving it aside and starting an empty one. Its marks are lost: URLs may be fetched again, none is lost. Inspect or delete the moved directory.",
		"path", path, "moved_to", aside, "err", cause)
	if err := os.Rename(path, aside); err != nil && !os.IsNotExist(err) {
		return nil, fmt.Errorf("seen store %s is damaged (%v) and cannot be moved aside: %w", path, cause, err)
	}
	db, err := s.open()
	if err != nil {
		return nil, fmt.Errorf("seen store %s: an empty store cannot be opened either: %w", path, err)
	}
	return db, nil
}

// condemn marks the store opened as generation gen damaged (a block failed
// its checksum in a read, a compaction or table stats) and replaces it now
// rather than at the next call, which may be long in coming on an idle
// scheduler while Pebble retries the damaged table in a loop. A late event
// of a store already replaced condemns nothing.
func (s *PebbleSeen) condemn(gen int64) {
	if gen != s.gen.Load() || s.damaged.Swap(true) {
		return
	}
	go s.replace()
}

func (s *PebbleSeen) backgroundError(path string, err error) {
	now, last := time.Now().UnixNano(), s.bgLogged.Load()
	if now-last < int64(bgLogEvery) || !s.bgLogged.CompareAndSwap(last, now) {
		s.bgMuted.Add(1)
		return
	}
	s.log.Error("seen store background error", "path", path, "err", err, "not_logged_since_the_last", s.bgMuted.Swap(0))
}

// replace closes a store found damaged while running, moves it aside and
// opens an empty one; if that fails, marks are kept in memory until the
// process ends, so that dedup goes on.
func (s *PebbleSeen) replace() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.damaged.Load() || s.db == nil {
		return
	}
	old := s.db
	s.db = nil
	func() {
		defer func() { recover() }() // a damaged store may fail to close in any way
		if err := old.Close(); err != nil {
			s.log.Error("seen store: closing the damaged store", "path", s.path(), "err", err)
		}
	}()
	db, err := s.moveAside(errDamaged)
	s.damaged.Store(false)
	if err != nil {
		s.log.Error("SEEN STORE LOST: keeping marks in memory until the scheduler restarts", "err", err)
		s.mem = NewMemorySeen()
		return
	}
	s.db = db
	s.corruptFiles.Clear()
}

var errDamaged = fmt.Errorf("a block failed its checksum while running")

// DamageSeenStore damages the files of a closed seen store in dir, the way
// a failing disk or a careless operator might, for tests of recovery: every
// file of the Pebble store is cut to a random length (some to nothing) and
// has random bytes written over it at random places; one file in four is
// removed. It returns the paths it damaged. Opening the store afterwards
// must succeed and answer "not seen" for whatever it cannot read.
func DamageSeenStore(dir string, seed uint64) ([]string, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var damaged []string
	err := filepath.WalkDir(filepath.Join(dir, "pebble"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		damaged = append(damaged, path)
		if rng.IntN(4) == 0 {
			return os.Remove(path)
		}
		return scramble(path, rng)
	})
	if err != nil {
		return damaged, fmt.Errorf("damage seen store: %w", err)
	}
	return damaged, nil
}

func scramble(path string, rng *rand.Rand) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	size := fi.Size()
	if size > 0 {
		size = rng.Int64N(size + 1)
	}
	if err := os.Truncate(path, size); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	junk := make([]byte, 64)
	for range 1 + size/4096 {
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(junk[:rng.IntN(len(junk))+1], rng.Int64N(size)); err != nil {
			return err
		}
	}
	return f.Sync()
}

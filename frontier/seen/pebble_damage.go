package seen

import (
	"errors"
	"fmt"
	"os"
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
func (s *Pebble) moveAside(cause error) (*pebble.DB, error) {
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
	s.salvage(aside, db)
	return db, nil
}

// salvage copies into db what it can read of the failure records and live
// rules of the store moved aside: they are a campaign's only account of
// the URLs that failed, where marks only save fetches. It opens the
// damaged store read-only and reads only their key spans (a few keys a
// campaign beside millions of marks), so a damaged table of marks is not
// read; what fails to read stays behind, and the log says so.
func (s *Pebble) salvage(aside string, db *pebble.DB) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("SEEN STORE: salvaging the failure records of the damaged store failed", "moved_to", aside, "err", fmt.Sprint(r))
		}
	}()
	old, err := pebble.Open(aside, &pebble.Options{
		ReadOnly: true, FS: s.fs, Merger: &pebble.Merger{Name: mergerName, Merge: mergeMarks},
		Logger: pebbleLogger{s.log},
		// Pebble's default stops the process on a corrupt block.
		EventListener: &pebble.EventListener{DataCorruption: func(pebble.DataCorruptionInfo) {}},
	})
	if err != nil {
		s.log.Error("SEEN STORE: the damaged store's failure records are lost: it cannot be opened to read them", "moved_to", aside, "err", err)
		return
	}
	defer old.Close()
	b := db.NewBatch()
	defer b.Close()
	n := 0
	var errs []error
	for _, kind := range []byte{kindFailure, kindRules, kindHistory, kindSchedule} {
		it, err := old.NewIter(&pebble.IterOptions{LowerBound: []byte{kind}, UpperBound: []byte{kind + 1}})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for it.First(); it.Valid(); it.Next() {
			if err := b.Set(it.Key(), it.Value(), nil); err != nil {
				errs = append(errs, err)
				break
			}
			n++
		}
		errs = append(errs, it.Error(), it.Close())
	}
	if err := b.Commit(pebble.Sync); err != nil {
		s.log.Error("SEEN STORE: the damaged store's failure records could not be copied", "moved_to", aside, "err", err)
		return
	}
	if err := errors.Join(errs...); err != nil {
		s.log.Error("SEEN STORE: some failure records of the damaged store could not be read; the others were kept", "kept", n, "moved_to", aside, "err", err)
		return
	}
	s.log.Warn("seen store: the damaged store's failure records, live rules, fetch history and revisit schedules were kept", "kept", n, "moved_to", aside)
}

// condemn marks the store opened as generation gen damaged (a block failed
// its checksum in a read, a compaction or table stats) and replaces it now
// rather than at the next call, which may be long in coming on an idle
// scheduler while Pebble retries the damaged table in a loop. A late event
// of a store already replaced condemns nothing.
func (s *Pebble) condemn(gen int64) {
	if gen != s.gen.Load() || s.damaged.Swap(true) {
		return
	}
	go s.replace()
}

func (s *Pebble) backgroundError(path string, err error) {
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
func (s *Pebble) replace() {
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
		s.mem = NewMemory()
		return
	}
	s.db = db
	s.corruptFiles.Clear()
}

var errDamaged = fmt.Errorf("a block failed its checksum while running")

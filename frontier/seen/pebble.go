package seen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/drover-crawl/drover/internal/dirsize"
)

// Pebble is the Store of a scheduler: a Pebble LSM store (WAL,
// leveled compaction, block checksums) in DIR/pebble, locked by DIR/LOCK so
// that one scheduler at a time uses a directory.
//
// Keys: a kind byte ('m' marks, 'f' failure records), the campaign ID, a
// 0x00 separator (campaign IDs never hold one) and the 16-byte URL hash.
// A campaign's marks are one contiguous span, so Drop is one range delete;
// its failure records are another span, which Drop leaves alone.
//
// A mark's value is one byte. MarkQueued writes a merge operand that a
// max-merger folds (done beats queued), so it never downgrades a done mark
// and needs no read before the write; MarkDone writes a plain set.
//
// Durability: see pebble_wal.go. Damage (pebble_damage.go): a
// store that cannot be opened, or whose block fails its checksum while
// running, is moved aside (logged at Error level with both paths) and an
// empty one started; the failed read answers "not seen". Either way the
// cost is duplicate fetches, never a lost URL.
type Pebble struct {
	dir   string
	lock  *os.File
	wo    *pebble.WriteOptions
	log   *slog.Logger
	cache int64
	// memtable: PebbleOptions.MemTableBytes; l0: PebbleOptions.L0Tables.
	memtable int64
	l0       int
	fs       vfs.FS
	gfs      *groupSyncFS // nil with FsyncEveryMark

	// mu is write-locked only to replace a damaged store.
	mu sync.RWMutex
	db *pebble.DB // nil once a replacement failed: mem serves then
	// mem stands in for a store that could not be replaced, so that dedup
	// goes on (in memory) rather than every mark failing.
	mem *Memory
	// gen counts the stores opened, so that a late event of a replaced
	// store does not condemn its successor.
	gen atomic.Int64
	// damaged: a read failed its checksum; the store is replaced before
	// the next call.
	damaged atomic.Bool

	fmu          sync.Mutex // RecordFailures reads before it writes
	compacting   atomic.Int64
	corruptFiles sync.Map // paths already logged as damaged

	// Background errors are logged at most once per bgLogEvery: Pebble
	// retries a table it cannot read in a loop, thousands a second.
	bgLogged atomic.Int64 // UnixNano of the last one logged
	bgMuted  atomic.Int64 // not logged since
}

const bgLogEvery = 10 * time.Second

// PebbleOptions configure OpenPebble; the zero value is the
// production setting.
type PebbleOptions struct {
	// Log receives the store's errors (damage, background errors); nil
	// discards them.
	Log *slog.Logger
	// FsyncInterval is how often the WAL is fsynced (0:
	// DefaultFsyncInterval); see "Durability" in pebble_wal.go.
	FsyncInterval time.Duration
	// FsyncEveryMark waits for an fsync of the WAL in every MarkQueued and
	// MarkDone (Pebble's group commit shares one among concurrent calls),
	// so that marks survive an OS crash too, at a millisecond or more per
	// call.
	FsyncEveryMark bool
	// CacheBytes is the block cache (0: DefaultCacheBytes). It should
	// hold the Bloom filters (1.25 bytes per URL) and the index blocks;
	// blocks it misses come from the page cache and are checksummed again.
	CacheBytes int64
	// MemTableBytes is the size of a memtable (0: Pebble's default, 4 MB).
	// A small one flushes and compacts often: `make chaos` uses it to kill
	// a scheduler in the middle of a compaction.
	MemTableBytes int64
	// L0Tables is how many tables (sublevels) level 0 gathers before
	// Pebble compacts it into the level below (0:
	// DefaultL0CompactionThreshold); writes stall at three times as many.
	L0Tables int
}

// DefaultL0CompactionThreshold is the seen store's level 0 before a
// compaction: 32 tables, against Pebble's 4. The store's keys are URL
// hashes, spread over the whole key space, so every table flushed to
// level 0 overlaps every table of the level below, and each compaction
// into it rewrites that level whole: the bigger the store, the more
// bytes rewritten per URL. Gathering 32 flushes first rewrites it an
// eighth as often. In BenchmarkCrawlMarks (a million pages' marks, URL
// index and fetch histories) the bytes compacted per page went 1,063 ->
// 268 and the store's CPU per page 114 -> 92 µs; at 64 tables the reads
// of level 0's tables cost more than the compactions saved (103 µs).
const DefaultL0CompactionThreshold = 32

// DefaultCacheBytes is the block cache of a Pebble: the Bloom
// filters of about 40 M URLs, or all the blocks of about 3 M.
const DefaultCacheBytes = 64 << 20

const (
	kindMark    byte = 'm'
	kindFailure byte = 'f'

	// tableBytes is the target size of every level's tables.
	tableBytes = 512 << 10

	// mergerName is stored in the store's OPTIONS file: a store
	// written with it refuses to open with another merger.
	mergerName = "drover.seen.max.v1"
)

// OpenPebble opens (or creates) the store in dir. A store that exists
// but cannot be opened (damaged or half-missing files) is renamed to
// DIR/pebble.damaged-TIME and replaced by an empty one: unknown means "not
// seen". A directory locked by another scheduler is an error.
func OpenPebble(dir string, o PebbleOptions) (*Pebble, error) {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// Our own lock, outside the Pebble directory, so that a damaged store
	// is never moved aside from under a live scheduler.
	lock, err := LockDir(dir)
	if err != nil {
		return nil, err
	}
	s := &Pebble{dir: dir, lock: lock, log: log, wo: pebble.Sync, cache: o.CacheBytes, memtable: o.MemTableBytes, l0: o.L0Tables, fs: vfs.Default}
	if s.cache <= 0 {
		s.cache = DefaultCacheBytes
	}
	if s.l0 <= 0 {
		s.l0 = DefaultL0CompactionThreshold
	}
	if !o.FsyncEveryMark {
		if o.FsyncInterval <= 0 {
			o.FsyncInterval = DefaultFsyncInterval
		}
		s.gfs = newGroupSyncFS(vfs.Default, o.FsyncInterval, log)
		s.fs = s.gfs
	}
	// Locked: a damage found while opening replaces the store from
	// another goroutine (condemn), which must see s.db set.
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db, err = s.open(); err != nil {
		if s.db, err = s.moveAside(err); err != nil {
			if s.gfs != nil {
				s.gfs.Close()
			}
			lock.Close()
			return nil, err
		}
	}
	return s, nil
}

// LockDir creates dir if it is missing and locks DIR/LOCK, so that one
// scheduler at a time uses a seen store's directory; closing the file
// releases the lock. A directory locked by another process is an error that
// says so.
func LockDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("seen store %s is in use by another scheduler (give each its own -seen): %w", dir, err)
	}
	return lock, nil
}

func (s *Pebble) path() string { return filepath.Join(s.dir, "pebble") }

// open opens the Pebble store; a panic of Pebble's (its logger's Fatalf)
// comes back as an error.
func (s *Pebble) open() (db *pebble.DB, err error) {
	path := s.path()
	gen := s.gen.Add(1)
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("pebble: %v", r)
		}
	}()
	opts := &pebble.Options{
		// Columnar blocks: keys are prefix-compressed in bundles and the
		// (zeroed) sequence numbers of the bottom level cost nothing.
		FormatMajorVersion: pebble.FormatNewest,
		CacheSize:          s.cache,
		MemTableSize:       uint64(max(s.memtable, 0)),
		// Pebble's own default stops writes at 3 times its threshold too
		// (12 for 4).
		L0CompactionThreshold: s.l0,
		L0StopWritesThreshold: 3 * s.l0,
		FS:                    s.fs,
		Merger:                &pebble.Merger{Name: mergerName, Merge: mergeMarks},
		Logger:                pebbleLogger{s.log},
		EventListener: &pebble.EventListener{
			// Pebble's default stops the process on a corrupt block; a
			// seen-set would rather answer "not seen".
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				if _, seen := s.corruptFiles.LoadOrStore(info.Path, true); !seen {
					s.log.Error("SEEN STORE DAMAGED: a block failed its checksum", "file", info.Path, "err", info.Details)
				}
				s.condemn(gen)
			},
			BackgroundError: func(err error) {
				if pebble.IsCorruptionError(err) {
					s.condemn(gen)
				}
				s.backgroundError(path, err)
			},
			CompactionBegin: func(pebble.CompactionInfo) { s.compacting.Add(1) },
			CompactionEnd:   func(pebble.CompactionInfo) { s.compacting.Add(-1) },
		},
	}
	// Bloom filters (Pebble has none by default) let a lookup skip the
	// levels that do not hold the key: without them a lookup reads a data
	// block in every level, and the benchmark's 10 M URLs took 45% longer
	// (bench/README.md). Tables are kept small, because a table's filter
	// is one block and Pebble answers a block that fails its checksum by
	// trying every single-bit flip of it, a cost quadratic in the block's
	// size (measured here: 5 ms for 4 KB, 0.28 s for 32 KB): the default
	// tables of up to 128 MB have filter blocks of megabytes, an hour or
	// more of search at the first lookup in a damaged store. 512 KB tables
	// have filter blocks of about 32 KB.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.TargetFileSizes[i] = tableBytes
	}
	return pebble.Open(path, opts)
}

// pebbleLogger sends Pebble's messages to slog. Fatalf panics rather than
// exiting the process: open recovers it and moves the store aside.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug("seen store: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error("seen store: " + fmt.Sprintf(format, args...))
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	l.log.Error("seen store fatal: " + msg)
	panic(msg)
}

// Close implements Store.
func (s *Pebble) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	if s.db != nil {
		err = s.db.Close()
		s.db = nil
	}
	if s.gfs != nil {
		s.gfs.Close()
		s.gfs = nil
	}
	return errors.Join(err, s.lock.Close()) // closing releases the flock
}

// Dir returns the directory the store was opened on.
func (s *Pebble) Dir() string { return s.dir }

// DiskBytes returns the bytes the store's files take (damaged stores moved
// aside not counted).
func (s *Pebble) DiskBytes() int64 { return dirsize.Of(s.path()) }

// Compacting returns how many compactions are running now (for benchmarks).
func (s *Pebble) Compacting() int { return int(s.compacting.Load()) }

// Compact compacts the whole store, so that each key has one record in the
// bottom level (for benchmarks: the smallest the store gets).
func (s *Pebble) Compact() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return nil
	}
	return s.db.Compact(context.Background(), []byte{0}, bytes.Repeat([]byte{0xff}, 32), true)
}

// Metrics returns Pebble's metrics of the store (levels, read amplification,
// caches, compactions), for benchmarks and operators' diagnosis.
func (s *Pebble) Metrics() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return "seen store: in memory (no Pebble store)"
	}
	return s.db.Metrics().String()
}

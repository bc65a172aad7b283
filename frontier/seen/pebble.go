package seen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
	// memtable: PebbleOptions.MemTableBytes.
	memtable int64
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
}

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
	s := &Pebble{dir: dir, lock: lock, log: log, wo: pebble.Sync, cache: o.CacheBytes, memtable: o.MemTableBytes, fs: vfs.Default}
	if s.cache <= 0 {
		s.cache = DefaultCacheBytes
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
		FS:                 s.fs,
		Merger:             &pebble.Merger{Name: mergerName, Merge: mergeMarks},
		Logger:             pebbleLogger{s.log},
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

func (s *Pebble) mark(db *pebble.DB, c string, k Key, buf []byte) (byte, []byte, error) {
	buf = storeKey(buf, kindMark, c, k)
	var m byte
	err := s.get(db, buf, func(v []byte) { m = markOf(v) })
	return m, buf, err
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
		m, _, err := s.mark(db, c, k, nil)
		done = m == markDone
		return err
	}, func(mem *Memory) (err error) { done, err = mem.Done(c, k); return err })
	return done, err
}

// MarkQueued implements Store.
func (s *Pebble) MarkQueued(c string, keys []Key) error {
	return s.use(c, func(db *pebble.DB) error {
		return s.write(db, c, keys, func(b *pebble.Batch, key []byte) error { return b.Merge(key, []byte{markQueued}, nil) })
	}, func(mem *Memory) error { return mem.MarkQueued(c, keys) })
}

// MarkDone implements Store.
func (s *Pebble) MarkDone(c string, keys []Key) error {
	return s.use(c, func(db *pebble.DB) error {
		return s.write(db, c, keys, func(b *pebble.Batch, key []byte) error { return b.Set(key, []byte{markDone}, nil) })
	}, func(mem *Memory) error { return mem.MarkDone(c, keys) })
}

func (s *Pebble) write(db *pebble.DB, c string, keys []Key, op func(*pebble.Batch, []byte) error) error {
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
	if err := b.Commit(s.wo); err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	return nil
}

// Drop implements Store: one range delete over the campaign's marks.
func (s *Pebble) Drop(c string) error {
	return s.use(c, func(db *pebble.DB) error {
		return errors.Join(s.deleteSpan(db, kindMark, c), s.deleteSpan(db, kindSchedule, c))
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

func (s *Pebble) deleteSpan(db *pebble.DB, kind byte, c string) error {
	lo, hi := span(kind, c)
	if err := db.DeleteRange(lo, hi, s.wo); err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	return nil
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

package bench

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/dirsize"
)

// The old seen store, LogSeen (frontier/seen_log.go until a03c0c1), kept
// here only as the seen-set benchmark's baseline ("-stores log"), so that
// `make bench` measures Pebble against it on the same machine and load.
// It is the code that was removed, with its Bloom filter module replaced by
// logBloom below; nothing outside the benchmark uses it.

func init() {
	SeenStores["log"] = func(dir string) (seenStore, error) { return openLogSeen(dir) }
}

// seenKey is the seen-set's URL hash.
type seenKey = seen.Key

const (
	markQueued byte = 1
	markDone   byte = 2
)

// logSeen is the old seen store, built like a small LSM tree, because a crawl's
// seen-set is written at random (hashed keys) and must stay small per URL:
//
//   - a memtable of recent marks, with an append-only log so that a
//     SIGKILL loses nothing written (the page cache survives the process);
//   - when the memtable holds memtableMax keys it is written as a sorted
//     run file of 17-byte records (16-byte key, 1-byte mark) and the log is
//     truncated; more than maxRuns runs are merged into one (a done mark
//     wins over a queued one);
//   - each run keeps in memory a Bloom filter (about 10 bits per key, 1%
//     false positives) and a sparse index (one key in indexEvery), so a
//     lookup reads at most one 4 KiB block per run that may hold the key.
//
// On disk a URL costs 17 bytes plus the log's share; in memory about 1.3
// bytes plus the memtable. bbolt, tried first, took 118 bytes per key on
// disk and 37 µs per key written at a million keys (each random insert
// rewrites a B+tree page).
type logSeen struct {
	dir  string
	lock *os.File
	mu   sync.Mutex
	cs   map[string]*seenSet
}

const (
	memtableMax = 1 << 16
	maxRuns     = 8
	recordSize  = 17
	indexEvery  = 256
)

// openLogSeen opens (or creates) the store in dir; each campaign gets a
// subdirectory, opened on first use.
func openLogSeen(dir string) (*logSeen, error) {
	// One scheduler per directory: two would interleave their logs.
	lock, err := seen.LockDir(dir)
	if err != nil {
		return nil, err
	}
	return &logSeen{dir: dir, lock: lock, cs: map[string]*seenSet{}}, nil
}

func (s *logSeen) set(c string) (*seenSet, error) {
	if ss := s.cs[c]; ss != nil {
		return ss, nil
	}
	if c == "" || strings.ContainsAny(c, `/\`) || c == "." || c == ".." || c == "LOCK" {
		return nil, fmt.Errorf("seen store: bad campaign id %q", c)
	}
	ss, err := openSeenSet(filepath.Join(s.dir, c))
	if err != nil {
		return nil, err
	}
	s.cs[c] = ss
	return ss, nil
}

// Queued implements seenStore.
func (s *logSeen) Queued(c string, keys []seenKey) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.set(c)
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(keys))
	for i, k := range keys {
		m, err := ss.get(k)
		if err != nil {
			return nil, err
		}
		out[i] = m != 0
	}
	return out, nil
}

// Done implements seenStore.
func (s *logSeen) Done(c string, k seenKey) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.set(c)
	if err != nil {
		return false, err
	}
	m, err := ss.get(k)
	return m == markDone, err
}

// MarkQueued implements seenStore.
func (s *logSeen) MarkQueued(c string, keys []seenKey) error { return s.mark(c, keys, markQueued) }

// MarkDone implements seenStore.
func (s *logSeen) MarkDone(c string, keys []seenKey) error { return s.mark(c, keys, markDone) }

func (s *logSeen) mark(c string, keys []seenKey, m byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.set(c)
	if err != nil {
		return err
	}
	return ss.mark(keys, m)
}

// Drop implements seenStore.
func (s *logSeen) Drop(c string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.cs[c]; ss != nil {
		ss.close()
		delete(s.cs, c)
	}
	if c == "" || strings.ContainsAny(c, `/\`) || c == "." || c == ".." {
		return nil
	}
	return os.RemoveAll(filepath.Join(s.dir, c))
}

// Close implements seenStore.
func (s *logSeen) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for c, ss := range s.cs {
		errs = append(errs, ss.close())
		delete(s.cs, c)
	}
	errs = append(errs, s.lock.Close()) // releases the flock
	return errors.Join(errs...)
}

// DiskBytes returns the bytes the store's files take.
func (s *logSeen) DiskBytes() int64 { return dirsize.Of(s.dir) }

// seenSet is one campaign's marks.
type seenSet struct {
	dir  string
	mem  map[seenKey]byte
	log  *os.File
	logw *bufio.Writer
	runs []*seenRun // oldest first
	seq  int
}

// seenRun is one sorted run file.
type seenRun struct {
	f     *os.File
	n     int
	bloom *logBloom
	index []seenKey // every indexEvery-th key
	name  string
}

func openSeenSet(dir string) (*seenSet, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	ss := &seenSet{dir: dir, mem: map[seenKey]byte{}}
	names, err := filepath.Glob(filepath.Join(dir, "run-*.seen"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, name := range names {
		r, err := openRun(name)
		if err != nil {
			return nil, err
		}
		ss.runs = append(ss.runs, r)
		var seq int
		fmt.Sscanf(filepath.Base(name), "run-%d.seen", &seq)
		ss.seq = max(ss.seq, seq)
	}
	// Replay the log of marks not yet in a run.
	logPath := filepath.Join(dir, "marks.log")
	if b, err := os.ReadFile(logPath); err == nil {
		for len(b) >= recordSize {
			var k seenKey
			copy(k[:], b[:16])
			ss.memSet(k, b[16])
			b = b[recordSize:]
		}
	}
	if ss.log, err = os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	ss.logw = bufio.NewWriterSize(ss.log, 64<<10)
	return ss, nil
}

func (ss *seenSet) memSet(k seenKey, m byte) {
	if m > ss.mem[k] {
		ss.mem[k] = m
	}
}

func (ss *seenSet) get(k seenKey) (byte, error) {
	best := ss.mem[k]
	if best == markDone {
		return best, nil
	}
	for i := len(ss.runs) - 1; i >= 0; i-- {
		m, err := ss.runs[i].get(k)
		if err != nil {
			return 0, err
		}
		best = max(best, m)
		if best == markDone {
			break
		}
	}
	return best, nil
}

func (ss *seenSet) mark(keys []seenKey, m byte) error {
	var rec [recordSize]byte
	for _, k := range keys {
		if ss.mem[k] >= m {
			continue
		}
		copy(rec[:16], k[:])
		rec[16] = m
		if _, err := ss.logw.Write(rec[:]); err != nil {
			return fmt.Errorf("seen store log: %w", err)
		}
		ss.memSet(k, m)
	}
	// Flushed to the OS on every call: it survives a SIGKILL (not an OS
	// crash, which costs duplicates, never URLs; see seen.Store).
	if err := ss.logw.Flush(); err != nil {
		return fmt.Errorf("seen store log: %w", err)
	}
	if len(ss.mem) >= memtableMax {
		return ss.flush()
	}
	return nil
}

// flush writes the memtable as a run, truncates the log and merges runs
// when there are too many.
func (ss *seenSet) flush() error {
	recs := make([]byte, 0, len(ss.mem)*recordSize)
	keys := make([]seenKey, 0, len(ss.mem))
	for k := range ss.mem {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b seenKey) int { return bytes.Compare(a[:], b[:]) })
	for _, k := range keys {
		recs = append(recs, k[:]...)
		recs = append(recs, ss.mem[k])
	}
	if err := ss.writeRun(recs); err != nil {
		return err
	}
	ss.mem = map[seenKey]byte{}
	if err := ss.log.Truncate(0); err != nil {
		return fmt.Errorf("seen store log: %w", err)
	}
	if len(ss.runs) > maxRuns {
		return ss.merge()
	}
	return nil
}

func (ss *seenSet) writeRun(recs []byte) error {
	ss.seq++
	name := filepath.Join(ss.dir, fmt.Sprintf("run-%08d.seen", ss.seq))
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, recs, 0o644); err != nil {
		return fmt.Errorf("seen store run: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("seen store run: %w", err)
	}
	r, err := openRun(name)
	if err != nil {
		return err
	}
	ss.runs = append(ss.runs, r)
	return nil
}

// merge rewrites every run as one, a done mark winning over a queued one.
func (ss *seenSet) merge() error {
	total := 0
	for _, r := range ss.runs {
		total += r.n
	}
	merged := make([]byte, 0, total*recordSize)
	var rs [][]byte
	for _, r := range ss.runs {
		b, err := io.ReadAll(io.NewSectionReader(r.f, 0, int64(r.n*recordSize)))
		if err != nil {
			return fmt.Errorf("seen store merge: %w", err)
		}
		rs = append(rs, b)
	}
	// k-way merge of sorted runs.
	pos := make([]int, len(rs))
	for {
		best := -1
		for i, b := range rs {
			if pos[i] >= len(b) {
				continue
			}
			if best < 0 || bytes.Compare(b[pos[i]:pos[i]+16], rs[best][pos[best]:pos[best]+16]) < 0 {
				best = i
			}
		}
		if best < 0 {
			break
		}
		key := rs[best][pos[best] : pos[best]+16]
		var m byte
		for i, b := range rs {
			if pos[i] < len(b) && bytes.Equal(b[pos[i]:pos[i]+16], key) {
				m = max(m, b[pos[i]+16])
				pos[i] += recordSize
			}
		}
		merged = append(merged, key...)
		merged = append(merged, m)
	}
	old := ss.runs
	ss.runs = nil
	if err := ss.writeRun(merged); err != nil {
		ss.runs = old
		return err
	}
	for _, r := range old {
		r.f.Close()
		os.Remove(r.name)
	}
	return nil
}

func (ss *seenSet) close() error {
	var errs []error
	if ss.logw != nil {
		errs = append(errs, ss.logw.Flush(), ss.log.Close())
	}
	for _, r := range ss.runs {
		errs = append(errs, r.f.Close())
	}
	return errors.Join(errs...)
}

func openRun(name string) (*seenRun, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("seen store run: %w", err)
	}
	if len(b)%recordSize != 0 {
		return nil, fmt.Errorf("seen store run %s: %d bytes is not a whole number of records", name, len(b))
	}
	n := len(b) / recordSize
	r := &seenRun{n: n, name: name, bloom: newLogBloom(max(n, 1))}
	for i := 0; i < n; i++ {
		k := b[i*recordSize : i*recordSize+16]
		r.bloom.Add(k)
		if i%indexEvery == 0 {
			var key seenKey
			copy(key[:], k)
			r.index = append(r.index, key)
		}
	}
	if r.f, err = os.Open(name); err != nil {
		return nil, fmt.Errorf("seen store run: %w", err)
	}
	return r, nil
}

// get returns k's mark in the run, or 0.
func (r *seenRun) get(k seenKey) (byte, error) {
	if r.n == 0 || !r.bloom.Test(k[:]) {
		return 0, nil
	}
	// The block whose first key is the last one <= k.
	blk := sort.Search(len(r.index), func(i int) bool { return bytes.Compare(r.index[i][:], k[:]) > 0 }) - 1
	if blk < 0 {
		return 0, nil
	}
	start := blk * indexEvery
	count := min(indexEvery, r.n-start)
	buf := make([]byte, count*recordSize)
	if _, err := r.f.ReadAt(buf, int64(start*recordSize)); err != nil {
		return 0, fmt.Errorf("seen store read: %w", err)
	}
	i := sort.Search(count, func(i int) bool { return bytes.Compare(buf[i*recordSize:i*recordSize+16], k[:]) >= 0 })
	if i < count && bytes.Equal(buf[i*recordSize:i*recordSize+16], k[:]) {
		return buf[i*recordSize+16], nil
	}
	return 0, nil
}

// logBloom is a Bloom filter of about 9.6 bits and 7 probes per key (1%
// false positives), as bloom.NewWithEstimates(n, 0.01) sized the old one.
// Keys are hashes already: two 64-bit halves drive double hashing.
type logBloom struct {
	bits []uint64
	m    uint64
}

func newLogBloom(n int) *logBloom {
	m := uint64(n)*96/10 + 64
	return &logBloom{bits: make([]uint64, (m+63)/64), m: m}
}

func (b *logBloom) probes(k []byte, f func(bit uint64) bool) bool {
	h1, h2 := binary.LittleEndian.Uint64(k[:8]), binary.LittleEndian.Uint64(k[8:16])|1
	for i := range uint64(7) {
		if !f((h1 + i*h2) % b.m) {
			return false
		}
	}
	return true
}

// Add adds a 16-byte key.
func (b *logBloom) Add(k []byte) {
	b.probes(k, func(bit uint64) bool { b.bits[bit/64] |= 1 << (bit % 64); return true })
}

// Test reports whether a 16-byte key may have been added.
func (b *logBloom) Test(k []byte) bool {
	return b.probes(k, func(bit uint64) bool { return b.bits[bit/64]&(1<<(bit%64)) != 0 })
}

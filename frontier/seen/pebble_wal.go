package seen

import (
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Durability of a mark: group commit on the WAL.
//
// MarkQueued and MarkDone commit with Pebble's Sync option, which writes
// the batch's WAL record to the file (a write(2)) and then calls the file's
// Sync. The WAL files of a Pebble defer that fsync: Sync returns as
// soon as the record is in the kernel, and a background loop fsyncs the
// WAL every FsyncInterval (100 ms by default), and whenever Pebble closes
// a WAL. So:
//   - a mark survives a crash of the process (SIGKILL, panic, OOM kill) once
//     its call returned: the kernel has the record;
//   - an OS crash or a power cut loses the last FsyncInterval of marks or
//     so (all of them, if the torn WAL keeps Pebble from opening and the
//     store is moved aside), which costs duplicate fetches, never a URL.
//
// Pebble's plain NoSync would not do: its WAL writer keeps records in a
// 32 KiB block in the process's memory until the block fills or a sync is
// asked for, so a SIGKILL loses them (TestPebbleSeenSurvivesKill fails with
// it). An fsync per commit, the other way, cost MarkQueued 245 µs at the
// median and 1.1 ms at p99 (6 ms while a compaction ran) on the development
// machine's disk, against 6 µs and 101 µs this way (bench/README.md; goal:
// 1 ms at p99); FsyncEveryMark keeps it for those who want it.
// Sstables and the MANIFEST are fsynced by Pebble as always.

// DefaultFsyncInterval is how often a Pebble fsyncs its WAL.
const DefaultFsyncInterval = 100 * time.Millisecond

// walCategory is the category Pebble creates its WAL files with.
const walCategory vfs.DiskWriteCategory = "pebble-wal"

// groupSyncFS is a vfs.FS whose WAL files defer their fsync to a loop.
type groupSyncFS struct {
	vfs.FS
	log *slog.Logger

	mu    sync.Mutex
	files map[*groupSyncFile]bool
	stop  chan struct{}
	done  chan struct{}
}

func newGroupSyncFS(fs vfs.FS, every time.Duration, log *slog.Logger) *groupSyncFS {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &groupSyncFS{FS: fs, log: log, files: map[*groupSyncFile]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go g.loop(every)
	return g
}

func (g *groupSyncFS) loop(every time.Duration) {
	defer close(g.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-g.stop:
			g.syncAll()
			return
		case <-t.C:
			g.syncAll()
		}
	}
}

func (g *groupSyncFS) syncAll() {
	g.mu.Lock()
	fs := make([]*groupSyncFile, 0, len(g.files))
	for f := range g.files {
		fs = append(fs, f)
	}
	g.mu.Unlock()
	for _, f := range fs {
		if err := f.flush(); err != nil {
			g.log.Error("seen store: WAL fsync failed (marks written since the last one may not survive an OS crash)", "err", err)
		}
	}
}

// Close stops the loop after a last fsync.
func (g *groupSyncFS) Close() {
	close(g.stop)
	<-g.done
}

func (g *groupSyncFS) wrap(f vfs.File, category vfs.DiskWriteCategory) vfs.File {
	if category != walCategory {
		return f
	}
	gf := &groupSyncFile{File: f, fs: g}
	g.mu.Lock()
	g.files[gf] = true
	g.mu.Unlock()
	return gf
}

func (g *groupSyncFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.Create(name, category)
	if err != nil {
		return nil, err
	}
	return g.wrap(f, category), nil
}

func (g *groupSyncFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := g.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return g.wrap(f, category), nil
}

func (g *groupSyncFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := g.FS.OpenReadWrite(name, category, opts...)
	if err != nil {
		return nil, err
	}
	return g.wrap(f, category), nil
}

// groupSyncFile is a WAL file: Sync only notes that an fsync is due.
type groupSyncFile struct {
	vfs.File
	fs *groupSyncFS

	mu     sync.Mutex // held while fsyncing or closing
	dirty  bool
	closed bool
}

// Sync returns at once: the data was written before Pebble called it, and
// the loop fsyncs it soon.
func (f *groupSyncFile) Sync() error {
	f.mu.Lock()
	f.dirty = true
	f.mu.Unlock()
	return nil
}

// SyncData is Sync.
func (f *groupSyncFile) SyncData() error { return f.Sync() }

func (f *groupSyncFile) flush() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dirty || f.closed {
		return nil
	}
	f.dirty = false
	return f.File.Sync()
}

// Close fsyncs what is due, so that a WAL Pebble closes (a rotation) is
// complete on disk before the next one starts.
func (f *groupSyncFile) Close() error {
	f.fs.mu.Lock()
	delete(f.fs.files, f)
	f.fs.mu.Unlock()
	err := f.flush()
	f.mu.Lock()
	f.closed = true
	f.mu.Unlock()
	if cerr := f.File.Close(); err == nil {
		err = cerr
	}
	return err
}

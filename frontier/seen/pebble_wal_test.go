package seen

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// countingFS counts the fsyncs that reach its files.
type countingFS struct {
	vfs.FS
	syncs atomic.Int64
}

type countingFile struct {
	vfs.File
	fs *countingFS
}

func (c *countingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := c.FS.Create(name, cat)
	return &countingFile{f, c}, err
}

func (f *countingFile) Sync() error { f.fs.syncs.Add(1); return f.File.Sync() }

// TestSeenGroupSyncWAL: a WAL file's Sync returns without an fsync, the loop
// fsyncs it within its interval, and closing it fsyncs what is due; other
// files sync at once.
func TestSeenGroupSyncWAL(t *testing.T) {
	under := &countingFS{FS: vfs.NewMem()}
	g := newGroupSyncFS(under, 50*time.Millisecond, nil)
	defer g.Close()

	wal, err := g.Create("000001.log", walCategory)
	if err != nil {
		t.Fatal(err)
	}
	sst, err := g.Create("000002.sst", "pebble-compaction")
	if err != nil {
		t.Fatal(err)
	}
	if err := sst.Sync(); err != nil {
		t.Fatal(err)
	}
	if n := under.syncs.Load(); n != 1 {
		t.Fatalf("a table's Sync: %d fsyncs, want 1 at once", n)
	}

	if _, err := wal.Write([]byte("record")); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := wal.Sync(); err != nil {
		t.Fatal(err)
	}
	// The loop may tick between the two lines above, so wait for it
	// rather than asserting that nothing happened yet.
	for under.syncs.Load() < 2 {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the WAL was not fsynced by the loop")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Nothing due: the loop does not fsync again.
	time.Sleep(150 * time.Millisecond)
	if n := under.syncs.Load(); n != 2 {
		t.Errorf("%d fsyncs with nothing written, want 2", n)
	}
	// Closing fsyncs what is due.
	if _, err := wal.Write([]byte("more")); err != nil {
		t.Fatal(err)
	}
	wal.Sync()
	if err := wal.Close(); err != nil {
		t.Fatal(err)
	}
	if n := under.syncs.Load(); n != 3 {
		t.Errorf("after Close: %d fsyncs, want 3", n)
	}
}

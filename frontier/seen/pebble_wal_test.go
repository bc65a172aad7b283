package seen

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	require.NoError(t, err)
	sst, err := g.Create("000002.sst", "pebble-compaction")
	require.NoError(t, err)
	require.NoError(t, sst.Sync())
	require.Equal(t, int64(1), under.syncs.Load(), "a table's Sync: fsyncs, want 1 at once")

	_, err = wal.Write([]byte("record"))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, wal.Sync())
	// The loop may tick between the two lines above, so wait for it
	// rather than asserting that nothing happened yet.
	for under.syncs.Load() < 2 {
		if time.Since(start) > 5*time.Second {
			require.FailNow(t, "the WAL was not fsynced by the loop")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Nothing due: the loop does not fsync again.
	time.Sleep(150 * time.Millisecond)
	assert.Equal(t, int64(2), under.syncs.Load(), "fsyncs with nothing written")
	// Closing fsyncs what is due.
	_, err = wal.Write([]byte("more"))
	require.NoError(t, err)
	wal.Sync()
	require.NoError(t, wal.Close())
	assert.Equal(t, int64(3), under.syncs.Load(), "fsyncs after Close")
}

package sink

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/page"
)

// errInjected is the fault a faultyFiles file returns.
var errInjected = errors.New("injected fault")

// faultyFiles is a WARC's file seam (WARC.create) for tests: it counts
// the fsyncs, knows how much of each file an fsync covered, and fails the
// next write or fsync when armed.
type faultyFiles struct {
	mu        sync.Mutex
	files     []*faultyFile
	syncs     int
	failWrite bool // fail the next Write (then disarm)
	failSync  bool // fail the next Sync (then disarm)
}

type faultyFile struct {
	warcOSFile
	ff      *faultyFiles
	path    string
	size    int64 // bytes written (the file's length: it is only appended to)
	durable int64 // size at the last successful fsync
}

func (ff *faultyFiles) create(path string) (warcOSFile, error) {
	f, err := createWARCFile(path)
	if err != nil {
		return nil, err
	}
	ff.mu.Lock()
	defer ff.mu.Unlock()
	file := &faultyFile{warcOSFile: f, ff: ff, path: path}
	ff.files = append(ff.files, file)
	return file, nil
}

func (ff *faultyFiles) arm(write, sync bool) {
	ff.mu.Lock()
	ff.failWrite, ff.failSync = write, sync
	ff.mu.Unlock()
}

// state returns the fsyncs so far and the bytes written but not covered
// by an fsync, over all files.
func (ff *faultyFiles) state() (syncs int, unsynced int64) {
	ff.mu.Lock()
	defer ff.mu.Unlock()
	for _, f := range ff.files {
		unsynced += f.size - f.durable
	}
	return ff.syncs, unsynced
}

// checkOnDisk fails the test if a file on disk holds bytes no fsync
// covered (a file removed is fine).
func (ff *faultyFiles) checkOnDisk(t *testing.T) {
	t.Helper()
	ff.mu.Lock()
	defer ff.mu.Unlock()
	for _, f := range ff.files {
		fi, err := os.Stat(f.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		require.Equal(t, f.durable, fi.Size(), "%s: bytes on disk beyond its last fsync", f.path)
	}
}

func (f *faultyFile) Write(p []byte) (int, error) {
	f.ff.mu.Lock()
	fail := f.ff.failWrite
	f.ff.failWrite = false
	f.ff.mu.Unlock()
	var n int
	var err error
	if fail {
		// Half of it lands, as on a disk that fills up.
		n, _ = f.warcOSFile.Write(p[:len(p)/2])
		err = errInjected
	} else {
		n, err = f.warcOSFile.Write(p)
	}
	f.ff.mu.Lock()
	f.size += int64(n)
	f.ff.mu.Unlock()
	return n, err
}

func (f *faultyFile) Sync() error {
	f.ff.mu.Lock()
	fail := f.ff.failSync
	f.ff.failSync = false
	f.ff.mu.Unlock()
	if fail {
		return errInjected
	}
	if err := f.warcOSFile.Sync(); err != nil {
		return err
	}
	f.ff.mu.Lock()
	f.ff.syncs++
	f.durable = f.size
	f.ff.mu.Unlock()
	return nil
}

func (f *faultyFile) Truncate(size int64) error {
	if err := f.warcOSFile.Truncate(size); err != nil {
		return err
	}
	f.ff.mu.Lock()
	f.size = size
	f.durable = min(f.durable, size)
	f.ff.mu.Unlock()
	return nil
}

func newFaultyWARC(t *testing.T, dir string) (*WARC, *faultyFiles) {
	t.Helper()
	w, err := NewWARC(WARCConfig{Dir: dir, Campaign: "camp-1"})
	require.NoError(t, err)
	ff := &faultyFiles{}
	w.create = ff.create
	t.Cleanup(func() { w.Close() })
	return w, ff
}

func storeOne(w *WARC, p *page.Page) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return w.Store(ctx, p)
}

// storedURLs reads dir back with gowarc (readWARCs checks the framing) and
// returns the URLs that have a response or a failure record.
// Each file's gzip members are checked whole first: gowarc was seen to
// hang on a file cut in the middle of a record.
func storedURLs(t *testing.T, dir string) map[string]int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	require.NoError(t, err)
	for _, f := range files {
		gzipMembers(t, f)
	}
	_, recs := readWARCs(t, dir)
	got := map[string]int{}
	for _, r := range recs {
		if r.typ == "response" || (r.typ == "metadata" && bytes.Contains(r.block, []byte("fetch-error"))) {
			got[r.uri]++
		}
	}
	return got
}

// A write, flush or fsync that fails fails the Store of every page of its
// batch; the file is cut back to its last fsync (or removed, when nothing
// in it was fsynced), so no record of an unacknowledged page stays, and the
// next Store starts a new, readable file.
func TestWARCWriteFlushFsyncFailures(t *testing.T) {
	pages := testPages(t, 10)
	small, big := pages[0], pages[3] // big: a body near the cap, larger than the 1 MiB write buffer
	require.True(t, len(big.Body) > 1<<20-1024, "page 3 is not larger than the write buffer")
	cases := []struct {
		name string
		// first: a page stored before the fault (nil: the fault hits a
		// new file's first batch).
		first       *page.Page
		failed      *page.Page
		write, sync bool
		want        string
	}{
		// A page larger than the buffer goes to the file in Store's write.
		{name: "write", first: pages[1], failed: big, write: true, want: "write "},
		// A small page stays in the buffer until the flush before fsync.
		{name: "flush", first: pages[1], failed: small, write: true, want: "write "},
		{name: "fsync", first: pages[1], failed: small, sync: true, want: "fsync "},
		{name: "fsync of a new file", failed: small, sync: true, want: "fsync "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			w, ff := newFaultyWARC(t, dir)
			if tc.first != nil {
				require.NoError(t, storeOne(w, tc.first))
			}
			ff.arm(tc.write, tc.sync)
			err := storeOne(w, tc.failed)
			require.ErrorIs(t, err, errInjected, "Store of %s under a %s fault", tc.failed.URL, tc.name)
			require.ErrorContains(t, err, tc.want)
			require.True(t, !Permanent(err), "a disk fault is not the page's fault: %v", err)

			after := pages[2]
			require.NoError(t, storeOne(w, after), "the Store after the fault")
			require.NoError(t, w.Close())
			ff.checkOnDisk(t)

			got := storedURLs(t, dir)
			want := map[string]int{after.URL: 1}
			if tc.first != nil {
				want[tc.first.URL] = 1
			}
			require.Equal(t, want, got, "pages on disk after a %s fault", tc.name)
		})
	}
}

package crawllog

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/page"
)

func TestWriterLinesReadBackWhole(t *testing.T) {
	root := t.TempDir()
	a, err := Create(root, "news~run1", "worker@host:1")
	require.NoError(t, err)
	b, err := Create(root, "news~run1", "worker@host:2")
	require.NoError(t, err)
	const each = 200
	var wg sync.WaitGroup
	for i := range 8 {
		w := a
		if i%2 == 1 {
			w = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range each {
				loc := page.Location{Kind: "warc", File: "f.warc.gz", Offset: int64(j)}
				assert.NoError(t, w.Write(Line{Outcome: OutcomePage, URL: fmt.Sprintf("http://h/%d/%d", i, j), Stored: []page.Location{loc}}))
			}
		}()
	}
	wg.Wait()
	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "a second Close")
	require.NoError(t, b.Close())
	require.ErrorIs(t, a.Write(Line{URL: "http://h/late"}), os.ErrClosed)

	seen := map[string]int{}
	files, bad, err := ReadDir(Dir(root, "news~run1"), func(l Line) { seen[l.URL]++ })
	require.NoError(t, err)
	require.Len(t, files, 2)
	require.Zero(t, bad)
	require.Len(t, seen, 8*each)
	for u, n := range seen {
		require.Equal(t, 1, n, u)
	}
}

func TestWriterAppendsToItsFile(t *testing.T) {
	root := t.TempDir()
	for range 2 {
		w, err := Create(root, "c", "w")
		require.NoError(t, err)
		require.NoError(t, w.Write(Line{URL: "http://h/"}))
		require.NoError(t, w.Close())
	}
	n := 0
	_, _, err := ReadDir(Dir(root, "c"), func(Line) { n++ })
	require.NoError(t, err)
	require.Equal(t, 2, n, "a worker's second session appends to its file")
}

func TestUnreadableLinesAreCounted(t *testing.T) {
	dir := Dir(t.TempDir(), "c")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	body := `{"outcome":"page","url":"http://h/a"}` + "\n" + `{"outcome":"pa` + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "crawl-w"+Ext), []byte(body), 0o644))
	n := 0
	_, bad, err := ReadDir(dir, func(Line) { n++ })
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, 1, bad)
}

func TestNamesStayInTheirDirectory(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"..", ".", "../x", "a/b", ""} {
		w, err := Create(root, name, name)
		require.NoError(t, err, name)
		require.Equal(t, root, filepath.Dir(filepath.Dir(w.Path())), "%q: %s", name, w.Path())
		require.NoError(t, w.Close())
	}
	require.NoError(t, os.WriteFile(filepath.Join(root, "plain"), nil, 0o644))
	_, err := Create(filepath.Join(root, "plain"), "c", "w")
	require.ErrorContains(t, err, "crawl_log names a directory", "a crawl_log that is a file")
}

package sink

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/page"
)

// warcRec is one record as read back by gowarc, with its raw block.
type warcRec struct {
	file, typ, id, uri, concurrentTo string
	header                           *gowarc.WarcFields
	block                            []byte
}

func storeAll(t *testing.T, s Sink, pages []*page.Page) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	errs := make([]error, len(pages))
	var wg sync.WaitGroup
	for i, p := range pages {
		wg.Go(func() { errs[i] = s.Store(ctx, p) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// readWARCs reads every record of every file in dir with gowarc and checks
// each file's framing: a warcinfo record first, one gzip member per record.
func readWARCs(t *testing.T, dir string) ([]string, []warcRec) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	require.NoError(t, err)
	sort.Strings(files)
	name := regexp.MustCompile(`^drover-camp-1-\d{14}-\d{5}\.warc\.gz$`)
	var recs []warcRec
	for _, f := range files {
		require.True(t, name.MatchString(filepath.Base(f)), "file name %s", f)
		r, err := gowarc.NewWarcFileReader(f, 0)
		require.NoError(t, err)
		n := 0
		for {
			rec, _, val, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err, "%s record %d", f, n)
			require.True(t, val.Valid(), "%s record %d: gowarc validation: %v", f, n, val)
			raw, err := rec.Block().RawBytes()
			require.NoError(t, err)
			block, err := io.ReadAll(raw)
			require.NoError(t, err)
			h := rec.WarcHeader()
			recs = append(recs, warcRec{file: f, typ: rec.Type().String(), id: h.Get(gowarc.WarcRecordID), header: h,
				uri: h.Get(gowarc.WarcTargetURI), concurrentTo: h.Get(gowarc.WarcConcurrentTo), block: block})
			if n == 0 {
				require.Equal(t, "warcinfo", rec.Type().String(), "first record of %s", f)
			}
			n++
		}
		require.NoError(t, r.Close())
		require.Equal(t, n, gzipMembers(t, f), "gzip members of %s", f)
	}
	return files, recs
}

// gzipMembers counts path's gzip members and fails the test on one that is
// cut short or corrupt.
func gzipMembers(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	br := bufio.NewReader(f)
	zr, err := gzip.NewReader(br)
	require.NoError(t, err, "%s: first gzip member", path)
	n := 0
	for {
		zr.Multistream(false)
		_, err := io.Copy(io.Discard, zr)
		require.NoError(t, err, "%s: gzip member %d", path, n)
		n++
		if err := zr.Reset(br); err == io.EOF {
			return n
		} else {
			require.NoError(t, err, "%s: gzip member %d", path, n)
		}
	}
}

func b32sha1(b []byte) string {
	s := sha1.Sum(b)
	return "sha1:" + base32.StdEncoding.EncodeToString(s[:])
}

func TestWARCStoresEveryPageByteIdentical(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWARC(WARCConfig{Dir: dir, Campaign: "camp-1", MaxFileSize: 32 << 10})
	require.NoError(t, err)
	pages := testPages(t, 120)
	storeAll(t, w, pages)
	require.NoError(t, w.Close())

	files, recs := readWARCs(t, dir)
	require.True(t, len(files) > 3, "files were not rotated: %d", len(files))
	t.Logf("%d pages in %d files", len(pages), len(files))
	ids := map[string]warcRec{}
	for _, r := range recs {
		ids[r.id] = r
		// Digests computed here, not trusted from gowarc.
		require.Equal(t, b32sha1(r.block), r.header.Get(gowarc.WarcBlockDigest), "block digest of %s %s", r.typ, r.uri)
	}
	want := byURL(pages)
	seen := map[string]bool{}
	for _, r := range recs {
		p := want[r.uri]
		switch r.typ {
		case "warcinfo":
			require.True(t, bytes.Contains(r.block, []byte("isPartOf: camp-1")), "warcinfo")
			continue
		case "request":
			require.Equal(t, string(p.Request), string(r.block), "request of %s", p.URL)
		case "response":
			require.True(t, p.Status != 0, "response for failed page %s", p.URL)
			require.True(t, !seen[p.URL], "two responses for %s", p.URL)
			seen[p.URL] = true
			head := p.StatusLine + "\r\n" + string(p.Header) + "\r\n"
			require.True(t, bytes.HasPrefix(r.block, []byte(head)), "response head of %s", p.URL)
			payload := r.block[len(head):]
			require.True(t, bytes.Equal(p.Body, payload), "payload of %s differs (%d vs %d bytes)", p.URL, len(payload), len(p.Body))
			require.Equal(t, b32sha1(p.Body), r.header.Get(gowarc.WarcPayloadDigest), "payload digest of %s", p.URL)
			require.Equal(t, p.IP, r.header.Get(gowarc.WarcIPAddress))
			require.Equal(t, p.Truncated, r.header.Get(gowarc.WarcTruncated) == "length", "WARC-Truncated of %s", p.URL)
			require.Equal(t, "request", ids[r.concurrentTo].typ, "response of %s not linked to its request", p.URL)
			d, err := time.Parse(time.RFC3339Nano, r.header.Get(gowarc.WarcDate))
			require.NoError(t, err)
			require.True(t, d.Equal(p.FetchedAt), "WARC-Date of %s", p.URL)
		case "metadata":
			require.True(t, bytes.Contains(r.block, []byte("campaign: camp-1\r\n")), "metadata of %s", p.URL)
			if p.Err != "" {
				require.True(t, bytes.Contains(r.block, []byte("fetch-error: "+p.Err+"\r\n")), "fetch-error of %s", p.URL)
				seen[p.URL] = true
			} else {
				require.Equal(t, "response", ids[r.concurrentTo].typ, "metadata of %s not linked to its response", p.URL)
			}
		default:
			require.FailNow(t, fmt.Sprintf("unexpected record type %s", r.typ))
		}
		require.NotNil(t, p, "record for unknown URL %q", r.uri)
	}
	require.Equal(t, len(pages), len(seen), "pages recorded")

	t.Run("warcio", func(t *testing.T) { warcioIndex(t, files, recs) })
}

// warcioIndex runs webrecorder's warcio (JavaScript), a reader independent
// of gowarc, over the files and checks that it lists every record.
func warcioIndex(t *testing.T, files []string, recs []warcRec) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, cli := warcioCLI(ctx, t)
	// -f takes an array, so it goes after the file names.
	args := append([]string{cli, "index"}, files...)
	args = append(args, "-f", "warc-type", "warc-record-id", "warc-target-uri")
	out, err := exec.CommandContext(ctx, node, args...).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.FailNow(t, fmt.Sprintf("warcio index: %v\n%s", err, exit.Stderr))
	}
	require.NoError(t, err, "warcio index")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var e map[string]string
		require.NoError(t, json.Unmarshal([]byte(line), &e), "warcio line %q", line)
		got = append(got, e["warc-type"]+" "+e["warc-record-id"]+" "+e["warc-target-uri"])
	}
	var want []string
	for _, r := range recs {
		want = append(want, r.typ+" "+r.id+" "+r.uri)
	}
	require.Equal(t, want, got, "warcio's index")
}

// warcioCLI installs webrecorder's warcio from npm into a temporary
// directory and returns node and its CLI's script; it skips the test
// without npm, node or the registry.
func warcioCLI(ctx context.Context, t *testing.T) (node, cli string) {
	t.Helper()
	testenv.NeedsTool(t, "npm (warcio, installed from the registry)")
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not on PATH")
	}
	node, err = exec.LookPath("node")
	if err != nil {
		t.Skip("node not on PATH")
	}
	dir := t.TempDir()
	install := exec.CommandContext(ctx, npm, "install", "--no-audit", "--no-fund", "--silent", "--prefix", dir, "warcio@2")
	if out, err := install.CombinedOutput(); err != nil {
		t.Skipf("npm install warcio failed (no registry?): %v\n%s", err, out)
	}
	return node, filepath.Join(dir, "node_modules", "warcio", "dist", "cli.js")
}

func TestWARCReadableAfterEachStore(t *testing.T) {
	// Durable on return: after each Store, with the sink still open (no
	// Close), every byte written was fsynced (the file seam counts) and the
	// files read back hold every page whose Store returned.
	dir := t.TempDir()
	w, ff := newFaultyWARC(t, dir)
	for i, p := range testPages(t, 10) {
		require.NoError(t, storeOne(w, p))
		syncs, unsynced := ff.state()
		require.Equal(t, int64(0), unsynced, "page %d: Store returned with bytes not fsynced (%d fsyncs so far)", i, syncs)
		require.True(t, syncs >= i+1, "page %d stored with %d fsyncs in all", i, syncs)
		got := storedURLs(t, dir)
		require.Equal(t, i+1, len(got), "pages readable after Store %d", i)
		require.Equal(t, 1, got[p.URL], "records of %s", p.URL)
	}
}

func TestWARCStoreAfterCloseFails(t *testing.T) {
	w, err := NewWARC(WARCConfig{Dir: t.TempDir(), Campaign: "camp-1"})
	require.NoError(t, err)
	require.NoError(t, w.Close())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.ErrorIs(t, w.Store(ctx, testPages(t, 1)[0]), ErrClosed)
}

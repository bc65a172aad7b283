package sink

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/page"
)

// bigBody is n deterministic bytes, not all alike.
func bigBody(n int) []byte {
	b := make([]byte, 0, n+64)
	for i := 0; len(b) < n; i++ {
		b = fmt.Appendf(b, "%09d large body line\n", i)
	}
	return b[:n]
}

// spooled moves p's body into a spool in dir, as the fetcher does with a
// body over its threshold.
func spooled(t *testing.T, p *page.Page, dir string) *page.Page {
	t.Helper()
	sp, err := page.CreateSpool(dir)
	require.NoError(t, err)
	_, err = sp.Write(p.Body)
	require.NoError(t, err)
	sp.Seal()
	t.Cleanup(func() { sp.Close() })
	p.Body, p.BodyFile = nil, sp
	return p
}

// TestWARCSpooledBody: spooled bodies, stored among in-memory pages,
// round-trip byte for byte with the digest of the whole body and no
// WARC-Truncated (length when the campaign's cap cut one); p.WARC and the
// CDXJ both point at the response record.
func TestWARCSpooledBody(t *testing.T) {
	dir, spoolDir := t.TempDir(), t.TempDir()
	w, err := NewWARC(WARCConfig{Dir: dir, Campaign: "camp-1", MaxFileSize: 64 << 10})
	require.NoError(t, err)
	pages := testPages(t, 30)
	bodies := map[string][]byte{}
	for i, p := range pages {
		if i%10 == 7 {
			p.Body = bigBody(3<<20 + i)
			p.Truncated = i == 17
			bodies[p.URL] = p.Body
			spooled(t, p, spoolDir)
		}
	}
	storeAll(t, w, pages)
	require.NoError(t, w.Close())

	files, recs := readWARCs(t, dir)
	seen := 0
	for _, r := range recs {
		body, ok := bodies[r.uri]
		if !ok || r.typ != "response" {
			continue
		}
		seen++
		p := byURL(pages)[r.uri]
		head := p.StatusLine + "\r\n" + string(p.Header) + "\r\n"
		require.True(t, bytes.HasPrefix(r.block, []byte(head)), "response head of %s", p.URL)
		require.True(t, bytes.Equal(body, r.block[len(head):]), "payload of %s differs (%d vs %d bytes)", p.URL, len(r.block)-len(head), len(body))
		require.Equal(t, b32sha1(body), r.header.Get(gowarc.WarcPayloadDigest), "payload digest of %s", p.URL)
		require.Equal(t, b32sha1(r.block), r.header.Get(gowarc.WarcBlockDigest), "block digest of %s", p.URL)
		require.Equal(t, p.Truncated, r.header.Get(gowarc.WarcTruncated) == "length", "WARC-Truncated of %s", p.URL)

		require.NotNil(t, p.WARC, "WARC location of %s", p.URL)
		require.Equal(t, filepath.Base(r.file), p.WARC.File, "file of %s", p.URL)
		requireRecordAt(t, r.file, p.WARC.Offset, p.URL)
		cdxj, err := os.ReadFile(cdxjPath(r.file))
		require.NoError(t, err)
		require.True(t, strings.Contains(string(cdxj), fmt.Sprintf(`"offset":"%d"`, p.WARC.Offset)), "CDXJ of %s lacks offset %d", r.file, p.WARC.Offset)
	}
	require.Equal(t, len(bodies), seen, "spooled responses")
	t.Logf("%d pages, %d spooled, in %d files", len(pages), len(bodies), len(files))

	var all []string
	for _, f := range files {
		raw, err := os.ReadFile(cdxjPath(f))
		require.NoError(t, err, "the index of %s", f)
		for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
			checkIndexLine(t, f, l)
			all = append(all, l)
		}
	}
	t.Run("warcio", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		node, cli := warcioCLI(ctx, t)
		cmd := exec.CommandContext(ctx, node, append([]string{cli, "cdx-index"}, files...)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		require.NoError(t, err, "warcio cdx-index")
		want := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		slices.Sort(want)
		slices.Sort(all)
		require.Equal(t, want, all, "warcio's CDXJ of the same files")
	})
}

// requireRecordAt checks that a gzip member starting at off in file is
// the response record of uri.
func requireRecordAt(t *testing.T, file string, off int64, uri string) {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	_, err = f.Seek(off, 0)
	require.NoError(t, err)
	zr, err := gzip.NewReader(bufio.NewReader(f))
	require.NoError(t, err)
	zr.Multistream(false)
	h := bufio.NewReader(zr)
	var fields []string
	for {
		l, err := h.ReadString('\n')
		require.NoError(t, err)
		if l == "\r\n" {
			break
		}
		fields = append(fields, strings.TrimSpace(l))
	}
	require.Equal(t, "WARC/1.1", fields[0], "record at %d", off)
	require.True(t, contains(fields, "WARC-Type: response") && contains(fields, "WARC-Target-URI: "+uri), "record at %d is not the response of %s: %v", off, uri, fields)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// gatedFile blocks every Write until its gate opens; entered is closed
// at the first.
type gatedFile struct {
	warcOSFile
	gate    chan struct{}
	entered chan struct{}
	once    *sync.Once
}

func (g *gatedFile) Write(b []byte) (int, error) {
	g.once.Do(func() { close(g.entered) })
	<-g.gate
	return g.warcOSFile.Write(b)
}

// openFDs counts the process's open descriptors (Linux), or -1.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestWARCSpooledStoreGivesUp: a Store of a spooled page that gives up
// while the writer is writing it, and three that give up waiting behind
// it, return their error; the writer then writes the page it holds
// whole, the three are not written, the next page is stored, and no
// record file stays open.
func TestWARCSpooledStoreGivesUp(t *testing.T) {
	dir, spoolDir := t.TempDir(), t.TempDir()
	gate, entered, once := make(chan struct{}), make(chan struct{}), &sync.Once{}
	w, err := NewWARC(WARCConfig{Dir: dir, Campaign: "camp-1"})
	require.NoError(t, err)
	w.create = func(path string) (warcOSFile, error) {
		f, err := createWARCFile(path)
		if err != nil {
			return nil, err
		}
		return &gatedFile{warcOSFile: f, gate: gate, entered: entered, once: once}, nil
	}
	pages := testPages(t, 5)
	for _, p := range pages[:4] {
		p.Body = bigBody(2 << 20)
		spooled(t, p, spoolDir)
	}
	before := openFDs()

	held, giveUp := context.WithCancel(context.Background())
	errs := make(chan error, 4)
	go func() { errs <- w.Store(held, pages[0]) }()
	select {
	case <-entered: // the writer is writing page 0, and blocked
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the writer never wrote")
	}
	for _, p := range pages[1:4] {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		go func() { errs <- w.Store(ctx, p) }()
	}
	for range 3 {
		require.ErrorIs(t, <-errs, context.DeadlineExceeded, "a Store waiting behind the writer")
	}
	giveUp()
	require.ErrorIs(t, <-errs, context.Canceled, "the Store the writer holds")
	close(gate)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, w.Store(ctx, pages[4]), "a page after them")
	require.NoError(t, w.Close())

	_, recs := readWARCs(t, dir) // gowarc validates every record's digests
	var responses []string
	for _, r := range recs {
		if r.typ == "response" {
			responses = append(responses, r.uri)
		}
	}
	require.Equal(t, []string{pages[0].URL, pages[4].URL}, responses, "responses written")
	if before >= 0 {
		require.True(t, openFDs() <= before, "descriptors: %d before, %d after", before, openFDs())
	}
}

// TestWARCWriteBatchSkipsReleased: a batch whose only page's Store gave
// up (its record released before the writer reached it) writes nothing
// and fails nothing.
func TestWARCWriteBatchSkipsReleased(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWARC(WARCConfig{Dir: dir, Campaign: "camp-1"})
	require.NoError(t, err)
	f, err := os.CreateTemp(t.TempDir(), "record-*")
	require.NoError(t, err)
	big := &bigRecord{f: f, size: 1, refs: 1}
	big.release() // its Store gave up
	require.NoError(t, w.writeBatch([]encodedPage{{data: []byte("request"), big: big, idx: &cdxEntry{}}}))
	require.NoError(t, w.Close())
	files, _ := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	require.Len(t, files, 0, "files")
}

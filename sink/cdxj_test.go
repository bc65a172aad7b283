package sink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/page"
)

func TestSURT(t *testing.T) {
	for in, want := range map[string]string{
		"http://example.com/":                      "com,example)/",
		"http://example.com":                       "com,example)/",
		"https://www.Example.com/A/b.HTML?z=1&a=2": "com,example)/a/b.html?a=2&z=1",
		"http://www2.example.com:8080/x":           "com,example:8080)/x",
		"http://example.com:80/x":                  "com,example)/x",
		"http://127.0.0.1:9000/p/1.html":           "1,0,0,127:9000)/p/1.html",
		"http://example.com/a b":                   "com,example)/a%20b",
		"mailto:x@example.com":                     "mailto:x@example.com",
	} {
		require.Equal(t, want, surt(in), in)
	}
}

// indexPages are pages whose index lines differ in every field: odd URLs,
// statuses, types, a page with no Content-Type, a failure (no line) and a
// revisit of each profile, one without its request record.
func indexPages(t *testing.T) []*page.Page {
	at := time.Date(2026, 12, 6, 7, 0, 0, 123456789, time.UTC)
	pages := testPages(t, 60)
	for i, u := range []string{"https://www.example.com/B?z=1&a=2&m", "http://example.com:8080/x?q=a%20b&b=<tag>", "http://example.com/r"} {
		pages = append(pages, &page.Page{URL: u, Campaign: "camp-1", Status: 200 + 101*i, StatusLine: "HTTP/1.1 " + strconv.Itoa(200+101*i) + " X",
			Header: []byte("Content-Type: Text/HTML ; charset=utf-8"), Body: []byte("b" + u), FetchedAt: at.Add(time.Duration(i) * time.Second),
			Request: []byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")})
	}
	n := len(pages)
	pages = append(pages, &page.Page{URL: "http://example.com/none", Campaign: "camp-1", Status: 204, StatusLine: "HTTP/1.1 204 No Content", FetchedAt: at},
		&page.Page{URL: "http://dead.example/", Campaign: "camp-1", Err: "dns: no such host", FetchedAt: at},
		revisitOf(pages[n-3], page.RevisitNotModified, at.Add(time.Hour)),
		revisitOf(pages[n-1], page.RevisitIdenticalDigest, at.Add(time.Hour)))
	pages[len(pages)-1].Request = nil
	return pages
}

// Every closed WARC file has its CDXJ beside it: one line per response,
// sorted, whose offset and length read back that response, and the same
// lines as webrecorder's warcio indexer makes of the files.
func TestWARCIndexesEachClosedFile(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWARC(WARCConfig{Dir: dir, Campaign: "camp-1", MaxFileSize: 32 << 10})
	require.NoError(t, err)
	pages := indexPages(t)
	storeAll(t, w, pages)
	require.NoError(t, w.Close())

	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	require.NoError(t, err)
	require.True(t, len(files) > 2, "files were not rotated: %d", len(files))
	var all []string
	for _, f := range files {
		raw, err := os.ReadFile(cdxjPath(f))
		require.NoError(t, err, "the index of %s", f)
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		if len(raw) == 0 {
			lines = nil
		}
		require.True(t, slices.IsSorted(lines), "%s is not sorted", cdxjPath(f))
		for _, l := range lines {
			checkIndexLine(t, f, l)
		}
		all = append(all, lines...)
	}
	responses := 0
	for _, p := range pages {
		if p.Status != 0 {
			responses++
		}
	}
	require.Len(t, all, responses, "index lines")
	checkRevisitLines(t, pages, all)

	t.Run("warcio", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		node, cli := warcioCLI(ctx, t)
		cmd := exec.CommandContext(ctx, node, append([]string{cli, "cdx-index"}, files...)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			require.FailNow(t, fmt.Sprintf("warcio cdx-index: %v\n%s", err, exit.Stderr))
		}
		require.NoError(t, err)
		want := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		slices.Sort(want)
		slices.Sort(all)
		require.Equal(t, want, all, "warcio's CDXJ of the same files")
	})
}

// checkRevisitLines checks the index lines of the revisits among pages,
// found by URL and timestamp: media type warc/revisit, the status of the
// revisit's own status line, the digest of the capture it refers to.
func checkRevisitLines(t *testing.T, pages []*page.Page, lines []string) {
	t.Helper()
	n := 0
	for _, p := range pages {
		if p.Revisit == nil {
			continue
		}
		n++
		prefix := surt(p.URL) + " " + cdxTimestamp(warcDate(p.FetchedAt)) + " "
		var got []string
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				got = append(got, l)
			}
		}
		require.Len(t, got, 1, "index lines of the revisit %s", prefix)
		var f struct{ Mime, Status, Digest string }
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(got[0], prefix)), &f), got[0])
		code, _, _ := strings.Cut(strings.TrimPrefix(p.StatusLine, "HTTP/1.1 "), " ")
		require.Equal(t, "warc/revisit "+code+" "+strings.TrimPrefix(p.Revisit.Digest, "sha1:"), f.Mime+" "+f.Status+" "+f.Digest, got[0])
	}
	require.True(t, n > 0, "no revisit among the pages")
}

// checkIndexLine reads the record a CDXJ line points at, with gowarc, and
// checks it is that URL's response (its revisit, for mime warc/revisit)
// with that digest, at that length.
func checkIndexLine(t *testing.T, file, line string) {
	t.Helper()
	parts := strings.SplitN(line, " ", 3)
	require.Len(t, parts, 3, line)
	var f struct{ URL, Mime, Digest, Length, Offset, Filename string }
	require.NoError(t, json.Unmarshal([]byte(parts[2]), &f), line)
	require.Equal(t, filepath.Base(file), f.Filename, line)
	require.Equal(t, surt(f.URL), parts[0], line)
	off, err := strconv.ParseInt(f.Offset, 10, 64)
	require.NoError(t, err)
	r, err := gowarc.NewWarcFileReader(file, off)
	require.NoError(t, err)
	defer r.Close()
	rec, gotOff, _, err := r.Next()
	require.NoError(t, err, line)
	defer rec.Close()
	require.Equal(t, off, gotOff)
	want := gowarc.Response
	if f.Mime == "warc/revisit" {
		want = gowarc.Revisit
	}
	require.Equal(t, want, rec.Type(), line)
	require.Equal(t, f.URL, rec.WarcHeader().Get(gowarc.WarcTargetURI), line)
	require.Equal(t, "sha1:"+f.Digest, rec.WarcHeader().Get(gowarc.WarcPayloadDigest), line)
	// The next record starts where the line says this one ends.
	next, nextOff, _, err := r.Next()
	if err == nil {
		next.Close()
		require.Equal(t, f.Length, strconv.FormatInt(nextOff-off, 10), line)
	}
}

package fetch

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime/debug"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/page"
)

// spoolBody is n bytes of HTML: a link at the start, filler, and a link
// at the end (beyond the in-memory head of a spooled body).
func spoolBody(n int) []byte {
	b := []byte(`<html><a href="/first">f</a>`)
	tail := []byte(`<a href="/last">l</a></html>`)
	for len(b) < n-len(tail) {
		b = append(b, "<p>filler filler filler</p>\n"...)
	}
	b = append(b[:n-len(tail)], tail...)
	return b
}

// spoolServer serves body at every path and counts the body bytes it
// wrote.
func spoolServer(t *testing.T, status int, body []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// openFDs counts the process's open descriptors (Linux), or -1.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestSpoolLargeBody: a body over the threshold is spooled whole, with
// the size and digest of what the server sent, no file left in the spool
// directory, links from its first bytes; Release frees it. A small body
// stays in memory.
func TestSpoolLargeBody(t *testing.T) {
	body := spoolBody(3 << 20)
	srv := spoolServer(t, 200, body)
	dir := t.TempDir()
	f, err := New(testConfig(srv.URL), WithSpool(dir, 64<<10))
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)

	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/big"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	p := res.Page
	require.True(t, p.BodyFile != nil, "not spooled")
	assert.Equal(t, 0, len(p.Body))
	assert.True(t, !p.Truncated)
	assert.Equal(t, int64(len(body)), p.BodySize())
	assert.Equal(t, page.PayloadDigest(body), p.BodyDigest())
	got, err := io.ReadAll(p.BodyReader())
	require.True(t, err == nil, err)
	assert.True(t, bytes.Equal(got, body), "spooled body differs")
	ents, _ := os.ReadDir(dir)
	assert.Equal(t, 0, len(ents), "the spool file is unlinked at creation")
	assert.Equal(t, []string{srv.URL + "/first"}, linkURLs(res.Links))

	require.True(t, p.Release() == nil)
	_, err = io.ReadAll(p.BodyReader())
	assert.True(t, err != nil, "read after Release")

	small := spoolServer(t, 200, spoolBody(32<<10))
	res = f.Fetch(testCtx(t), Request{URL: small.URL + "/small"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	assert.True(t, res.Page.BodyFile == nil && len(res.Page.Body) == 32<<10, "a small body is spooled")
}

// TestSpoolCapped: a campaign's cap above the threshold cuts a spooled
// body there: truncated, the digest of the part kept.
func TestSpoolCapped(t *testing.T) {
	body := spoolBody(1 << 20)
	srv := spoolServer(t, 200, body)
	cfg := testConfig(srv.URL)
	cfg.BodyCap = 200 << 10
	f, err := New(cfg, WithSpool(t.TempDir(), 64<<10))
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	require.True(t, res.Page != nil && res.Page.BodyFile != nil, res.Err)
	defer res.Page.Release()
	assert.True(t, res.Page.Truncated)
	assert.Equal(t, cfg.BodyCap, res.Page.BodySize())
	assert.Equal(t, page.PayloadDigest(body[:cfg.BodyCap]), res.Page.BodyDigest())
}

// TestSpoolNoLeak: a body cut by the server, and a 503 that is retried,
// leave no spool open.
func TestSpoolNoLeak(t *testing.T) {
	if openFDs() < 0 {
		t.Skip("needs /proc/self/fd")
	}
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(4<<20))
		w.WriteHeader(200)
		w.Write(spoolBody(1 << 20))
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	t.Cleanup(cut.Close)
	unavailable := spoolServer(t, 503, spoolBody(1<<20))
	f, err := New(testConfig(cut.URL), WithSpool(t.TempDir(), 64<<10))
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)

	// No collection meanwhile: an *os.File's finalizer would close a
	// leaked spool and hide the leak.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	before := openFDs()
	for range 20 {
		res := f.Fetch(testCtx(t), Request{URL: cut.URL + "/", Attempt: 1, MaxAttempts: 3})
		assert.True(t, res.Retry && res.Page == nil, "a cut body is retried")
		res = f.Fetch(testCtx(t), Request{URL: unavailable.URL + "/", Attempt: 1, MaxAttempts: 3})
		assert.True(t, res.Retry && res.Page == nil, "a 503 is retried")
	}
	f.Close() // idle connections
	after := openFDs()
	assert.True(t, after <= before+2, fmt.Sprint("descriptors: ", before, " before, ", after, " after 40 fetches"))
}

// paced serves n bytes of body in chunks every interval, then stalls
// (until the client goes away) when stall is set instead of ending.
func paced(t *testing.T, n, chunk int, every time.Duration, stall bool) string {
	t.Helper()
	body := spoolBody(n)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size := n
		if stall {
			size = n + 1 // never sent
		}
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(200)
		for off := 0; off < n; off += chunk {
			if _, err := w.Write(body[off:min(off+chunk, n)]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(every):
			case <-r.Context().Done():
				return
			}
		}
		if stall {
			<-r.Context().Done()
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/"
}

// TestSpoolEarnsTime: a large body that keeps arriving (5 MiB/s) is
// fetched whole although it takes longer than Timeouts.Response; one that
// stalls fails as a timeout once the time its bytes earned runs out.
func TestSpoolEarnsTime(t *testing.T) {
	to := Timeouts{DNS: time.Second, Connect: time.Second, TLSHandshake: time.Second, ResponseHeader: time.Second, Response: 500 * time.Millisecond}
	fetchURL := func(u string) (Result, time.Duration) {
		f, err := New(testConfig(u), WithSpool(t.TempDir(), 64<<10), WithTimeouts(to))
		require.True(t, err == nil, err)
		t.Cleanup(f.Close)
		start := time.Now()
		res := f.Fetch(testCtx(t), Request{URL: u, Attempt: 1, MaxAttempts: 2})
		return res, time.Since(start)
	}

	res, took := fetchURL(paced(t, 6<<20, 256<<10, 50*time.Millisecond, false))
	require.True(t, res.Page != nil && res.Page.BodyFile != nil, fmt.Sprint("a body arriving at 5 MiB/s for ", took, ": ", res.Err))
	defer res.Page.Release()
	assert.True(t, took > to.Response, fmt.Sprint("the body came within the plain timeout: nothing tested (", took, ")"))
	assert.True(t, !res.Page.Truncated && res.Page.BodySize() == 6<<20, fmt.Sprint("size ", res.Page.BodySize()))

	res, took = fetchURL(paced(t, 2<<20, 256<<10, time.Millisecond, true))
	require.True(t, res.Retry && res.Page == nil, fmt.Sprint("a stalled body is retried: ", res.Err))
	assert.Equal(t, page.ReasonTimeout, res.Reason, res.Err)
	// 500 ms, and about 2 s for the 2 MiB past the 64 KiB kept in memory.
	assert.True(t, took > 2*time.Second && took < 5*time.Second, fmt.Sprint("a stalled body timed out after ", took))
}

// TestSpoolRevisit: a spooled body with the digest of the earlier capture
// is a revisit, and its spool is released at once (the body is not
// stored again).
func TestSpoolRevisit(t *testing.T) {
	body := spoolBody(2 << 20)
	srv := spoolServer(t, 200, body)
	f, err := New(testConfig(srv.URL), WithSpool(t.TempDir(), 64<<10))
	require.True(t, err == nil, err)
	t.Cleanup(f.Close)
	prior := &page.Capture{Status: 200, Digest: page.PayloadDigest(body), Date: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // see TestSpoolNoLeak
	before := openFDs()
	for range 10 {
		res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/", Prior: prior})
		require.True(t, res.Page != nil && res.Page.Revisit != nil, fmt.Sprint("not a revisit: ", res.Err))
		assert.True(t, res.Page.BodyFile == nil && len(res.Page.Body) == 0, "a revisit keeps its body")
		assert.Equal(t, prior.Digest, res.Page.Revisit.Digest)
		assert.Equal(t, page.RevisitIdenticalDigest, res.Unchanged)
	}
	f.Close()
	if before >= 0 {
		after := openFDs()
		assert.True(t, after <= before+2, fmt.Sprint("descriptors: ", before, " before, ", after, " after 10 revisits"))
	}
}

package replay

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nlnwa/gowarc"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gzipped is body in gzip content coding.
func gzipped(t *testing.T, body string) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write([]byte(body))
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// revisitWARC writes a revisit record of uri, pointing at refersTo, whose
// block is an HTTP head alone.
func revisitWARC(t *testing.T, file, uri, refersTo, head string) {
	t.Helper()
	var out bytes.Buffer
	err := writeRecord(&out, false, gowarc.Revisit, []byte(head),
		gowarc.WarcTargetURI, uri, gowarc.WarcRefersToTargetURI, refersTo,
		gowarc.WarcProfile, gowarc.ProfileIdenticalPayloadDigestV1_1)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(file, out.Bytes(), 0o644))
}

// TestOpenIndexes: of several responses for a URI the first 2xx or 3xx
// wins, across files of both kinds; a revisit serves the response it
// refers to under its own head, or, for a 304, as it was; URLs match after normalization.
func TestOpenIndexes(t *testing.T) {
	dir := t.TempDir()
	const site = "http://example.test"
	writeWARC(t, filepath.Join(dir, "1.warc.gz"),
		response(site+"/a", http.StatusNotFound, "text/plain", []byte("gone")),
		response(site+"/a", http.StatusOK, "text/plain", []byte("first a")),
		response(site+"/b", http.StatusFound, "text/plain", nil))
	writeWARC(t, filepath.Join(dir, "2.warc"),
		response(site+"/a", http.StatusOK, "text/plain", []byte("second a")),
		response(site+"/b", http.StatusOK, "text/plain", []byte("later b")),
		response(site+"/", http.StatusOK, "text/html", []byte("root")))
	revisitWARC(t, filepath.Join(dir, "3.warc"), site+"/again", site+"/a", "HTTP/1.1 200 OK\r\nContent-Type: text/x-again\r\n\r\n")
	revisitWARC(t, filepath.Join(dir, "4.warc"), site+"/same", site+"/a", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not WARC"), 0o644))

	a, err := Open(dir)
	require.NoError(t, err)
	tests := []struct {
		url, body, ctype string
		status           int
	}{
		{site + "/a", "first a", "text/plain", http.StatusOK},
		{site + "/b", "", "text/plain", http.StatusFound},
		{"HTTP://Example.TEST:80", "root", "text/html", http.StatusOK},
		{site + "/a#part", "first a", "text/plain", http.StatusOK},
		{site + "/again", "first a", "text/x-again", http.StatusOK},
		{site + "/same", "first a", "text/plain", http.StatusOK}, // a 304 stands for its capture
	}
	for _, tt := range tests {
		res, ok := a.Lookup(tt.url)
		if !ok || res.Status != tt.status || string(res.Body) != tt.body || res.Header.Get("Content-Type") != tt.ctype {
			assert.Failf(t, "wrong lookup", "Lookup(%s) = %+v (found %v), want %d %q %q", tt.url, res, ok, tt.status, tt.ctype, tt.body)
		}
	}
	assert.Equal(t, []string{site + "/", site + "/a", site + "/again", site + "/b", site + "/same"}, a.URIs(), "URIs()")
	_, err = Open(t.TempDir())
	assert.ErrorContains(t, err, "no *.warc", "Open of an empty directory: want an error saying it holds no WARC file")
}

// TestHandlerServesAsArchived proxies requests in absolute form: the
// archived status, header and raw body, without the hop-by-hop fields and
// with the body's length; a 404 that says so for a URL not archived;
// CONNECT refused; every request recorded.
func TestHandlerServesAsArchived(t *testing.T) {
	dir := t.TempDir()
	const site = "http://example.test"
	coded := gzipped(t, "hello, archived world")
	res := response(site+"/coded", http.StatusOK, "text/plain", coded)
	res.Header.Set("Content-Encoding", "gzip")
	res.Header.Set("Transfer-Encoding", "chunked") // drover keeps the raw header over a de-chunked body
	res.Header.Set("Connection", "keep-alive, X-Private")
	res.Header.Set("X-Private", "for the hop only")
	res.Header.Set("X-Kept", "end to end")
	res.Header.Set("Content-Length", "99999")
	writeWARC(t, filepath.Join(dir, "a.warc"), res)
	a, err := Open(dir)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()

	// A client whose proxy is the handler sends the absolute form.
	client := &http.Client{Transport: &http.Transport{
		Proxy:              func(*http.Request) (*url.URL, error) { return url.Parse(srv.URL) },
		DisableCompression: true,
	}}
	resp, err := client.Get(site + "/coded")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Falsef(t, resp.StatusCode != http.StatusOK || !bytes.Equal(body, coded) || resp.ContentLength != int64(len(coded)),
		"GET /coded: %d, %d bytes (Content-Length %d), want 200 and the archived %d bytes", resp.StatusCode, len(body), resp.ContentLength, len(coded))
	h := resp.Header
	assert.Falsef(t, h.Get("Content-Encoding") != "gzip" || h.Get("X-Kept") != "end to end" || h.Get("X-Private") != "" || len(resp.TransferEncoding) != 0,
		"GET /coded: header %v, transfer coding %v; want Content-Encoding and X-Kept, no X-Private, no chunking", h, resp.TransferEncoding)

	resp, err = client.Get(site + "/elsewhere")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Falsef(t, resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), site+"/elsewhere"),
		"GET /elsewhere: %d %q, want 404 naming the URL", resp.StatusCode, body)
	// The browser's own icon request: answered 404, not a miss.
	resp, err = client.Get(site + "/favicon.ico")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "GET /favicon.ico: status")
	req, _ := http.NewRequest(http.MethodConnect, srv.URL, nil)
	req.Host = "example.test:443"
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode, "CONNECT: status")
	assert.Falsef(t, !slices.Equal(a.Served(), []string{site + "/coded"}) || !slices.Equal(a.Misses(), []string{site + "/elsewhere", "example.test:443"}),
		"Served() %v, Misses() %v", a.Served(), a.Misses())
}

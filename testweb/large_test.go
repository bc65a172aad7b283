package testweb

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"io"
	"net/http"
	"testing"
)

// TestLargeFile: /large.bin is LargeBytes of lines as documented, its
// Content-Length says so, any range of it is what a full read gives, and
// LargeDigest is the digest of what a client receives.
func TestLargeFile(t *testing.T) {
	const size = 3<<20 + 5 // not a whole number of lines
	w, err := Start(Config{Hosts: 1, PagesPerHost: 2, LinksPerPage: 4, NavLinks: 2, LargeBytes: size})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	resp, err := http.Get(w.LargeURL())
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || resp.ContentLength != size || len(body) != size {
		t.Fatalf("GET %s: %v, status %d, Content-Length %d, %d bytes; want %d", w.LargeURL(), err, resp.StatusCode, resp.ContentLength, len(body), size)
	}
	if !bytes.HasPrefix(body, []byte("0000000000000000 drover testweb large body, made as it is sent.\n0000000000000001 ")) {
		t.Fatalf("starts %q", body[:80])
	}
	s := sha1.Sum(body)
	if d := "sha1:" + base32.StdEncoding.EncodeToString(s[:]); w.LargeDigest() != d {
		t.Fatalf("LargeDigest %s, the body's %s", w.LargeDigest(), d)
	}
	for _, off := range []int64{0, 1, 63, 64, 1000, size - 10} {
		b := make([]byte, min(100, size-off))
		largeAt(b, off)
		if !bytes.Equal(b, body[off:off+int64(len(b))]) {
			t.Fatalf("largeAt(%d) differs from the body", off)
		}
	}
	if got := w.Count(w.LargeURL()); got != 1 {
		t.Fatalf("Count(LargeURL) = %d, want 1", got)
	}
}

package testweb

import (
	"bytes"
	"crypto/sha1"
	"encoding/base32"
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLargeFile: /large.bin is LargeBytes of lines as documented, its
// Content-Length says so, any range of it is what a full read gives, and
// LargeDigest is the digest of what a client receives.
func TestLargeFile(t *testing.T) {
	const size = 3<<20 + 5 // not a whole number of lines
	w, err := Start(Config{Hosts: 1, PagesPerHost: 2, LinksPerPage: 4, NavLinks: 2, LargeBytes: size})
	require.NoError(t, err)
	t.Cleanup(func() { w.Close() })
	resp, err := http.Get(w.LargeURL())
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Falsef(t, err != nil || resp.StatusCode != 200 || resp.ContentLength != size || len(body) != size,
		"GET %s: %v, status %d, Content-Length %d, %d bytes; want %d", w.LargeURL(), err, resp.StatusCode, resp.ContentLength, len(body), size)
	require.Truef(t, bytes.HasPrefix(body, []byte("0000000000000000 drover testweb large body, made as it is sent.\n0000000000000001 ")), "starts %q", body[:80])
	s := sha1.Sum(body)
	require.Equal(t, "sha1:"+base32.StdEncoding.EncodeToString(s[:]), w.LargeDigest(), "LargeDigest, against the body's")
	for _, off := range []int64{0, 1, 63, 64, 1000, size - 10} {
		b := make([]byte, min(100, size-off))
		largeAt(b, off)
		require.Truef(t, bytes.Equal(b, body[off:off+int64(len(b))]), "largeAt(%d) differs from the body", off)
	}
	require.Equal(t, 1, w.Count(w.LargeURL()), "Count(LargeURL)")
}

package testweb

import (
	"crypto/sha1"
	"encoding/base32"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// pathLarge is host 0's generated large file (Config.LargeBytes).
const pathLarge = "/large.bin"

// largeLine is the length of one line of the large file: a 16-digit line
// number and a fixed text. The text repeats, the numbers do not: the file
// compresses (about 6x with gzip), as text data sets do, and a byte out of
// place changes its digest.
const largeLine = 64

var largeText = []byte(" drover testweb large body, made as it is sent.\n") // largeLine-16 bytes

// largeAt fills b with the large file's bytes from off on.
func largeAt(b []byte, off int64) {
	var line [largeLine]byte
	n := off / largeLine
	for i := 0; i < len(b); {
		ln := strconv.AppendInt(line[:0], n, 10)
		pad := 16 - len(ln)
		copy(line[pad:], ln)
		for j := range pad {
			line[j] = '0'
		}
		copy(line[16:], largeText)
		start := 0
		if i == 0 {
			start = int(off % largeLine)
		}
		i += copy(b[i:], line[start:])
		n++
	}
}

// largeReader reads the large file of size bytes, generating each chunk
// as it is read: the file is never in memory.
type largeReader struct {
	off, size int64
}

func (r *largeReader) Read(b []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	b = b[:min(int64(len(b)), r.size-r.off)]
	largeAt(b, r.off)
	r.off += int64(len(b))
	return len(b), nil
}

// LargeURL is the URL of host 0's generated large file, "" without
// Config.LargeBytes.
func (w *Web) LargeURL() string {
	if w.cfg.LargeBytes == 0 {
		return ""
	}
	return "http://" + w.addrs[0] + pathLarge
}

// LargeDigest is the payload digest of the large file ("sha1:" and the
// base32 of its SHA-1, as WARC-Payload-Digest has it), computed once by
// generating it again; "" without Config.LargeBytes.
func (w *Web) LargeDigest() string {
	if w.cfg.LargeBytes == 0 {
		return ""
	}
	w.largeOnce.Do(func() {
		h := sha1.New()
		buf := make([]byte, 256<<10)
		_, _ = io.CopyBuffer(h, &largeReader{size: w.cfg.LargeBytes}, buf)
		w.largeDigest = "sha1:" + base32.StdEncoding.EncodeToString(h.Sum(nil))
	})
	return w.largeDigest
}

// largeState is a Web's cache of LargeDigest.
type largeState struct {
	largeOnce   sync.Once
	largeDigest string
}

// writeLarge sends the large file, generated as it goes.
func writeLarge(rw http.ResponseWriter, size int64) {
	buf := make([]byte, 64<<10)
	_, _ = io.CopyBuffer(rw, &largeReader{size: size}, buf) // the client went away: nothing to do
}

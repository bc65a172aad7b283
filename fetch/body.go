package fetch

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"strings"
)

// decodeBody undoes a Content-Encoding for parsing, reading at most limit
// decoded bytes (so a gzip bomb costs limit bytes, not gigabytes);
// truncated is set when there was more. A body cut by the body cap decodes
// as far as it goes: the error of a truncated stream is not reported when
// some bytes came out. An unknown coding is an error (the page is stored,
// not parsed).
func decodeBody(body []byte, encoding string, limit int64) (decoded []byte, truncated bool, err error) {
	codings := strings.Split(encoding, ",")
	decoded = body
	// Codings are listed in the order they were applied: undo the last first.
	for i := len(codings) - 1; i >= 0; i-- {
		var r io.Reader
		src := bytes.NewReader(decoded)
		switch c := strings.ToLower(strings.TrimSpace(codings[i])); c {
		case "", "identity":
			continue
		case "gzip", "x-gzip":
			zr, err := gzip.NewReader(src)
			if err != nil {
				return nil, false, fmt.Errorf("gzip: %w", err)
			}
			r = zr
		case "deflate":
			// RFC 9110 says zlib; some servers send raw deflate.
			if zr, err := zlib.NewReader(src); err == nil {
				r = zr
			} else {
				r = flate.NewReader(bytes.NewReader(decoded))
			}
		default:
			return nil, false, fmt.Errorf("unsupported content-encoding %q", c)
		}
		out, t, err := readCapped(r, limit, 4*int64(len(decoded))) // compressed HTML is 3-5x smaller
		truncated = truncated || t
		if err != nil && len(out) == 0 {
			return nil, truncated, fmt.Errorf("decoding %s: %w", codings[i], err)
		}
		decoded = out
	}
	return decoded, truncated, nil
}

// readCapped reads at most limit bytes of r; truncated is set when r had
// more. It stops reading there: the rest is never transferred (the
// connection is closed rather than drained). hint is the expected size
// (a Content-Length; <= 0 unknown): the buffer starts at it, so that a
// body of known length is read into one allocation rather than grown and
// copied from 512 bytes (io.ReadAll's start: five copies for 8 KB).
func readCapped(r io.Reader, limit, hint int64) (b []byte, truncated bool, err error) {
	size := int64(512)
	if hint > 0 {
		size = min(hint, limit) + 1 // +1: room to see the end without growing
	}
	b = make([]byte, 0, size)
	lr := io.LimitReader(r, limit+1)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow as append does
		}
		var n int
		n, err = lr.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			break
		}
	}
	if int64(len(b)) > limit {
		return b[:limit], true, err
	}
	return b, false, err
}

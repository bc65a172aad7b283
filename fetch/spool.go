package fetch

import (
	"fmt"
	"io"

	"github.com/drover-crawl/drover/page"
)

// DefaultSpoolThreshold is the largest body a fetch holds in memory; a
// larger one is spooled to a temporary file as it arrives (page.Spool),
// so that a worker's memory is bounded by its fetch slots times this,
// whatever the size of a body. It is the old default body cap: an
// ordinary page is read as before, with no file.
const DefaultSpoolThreshold = 1 << 20

// maxParse bounds the decoded body parsed for links when the campaign
// sets a body cap above the spool threshold: a spooled body is parsed
// from its first DefaultSpoolThreshold bytes, which decode to at most this.
const maxParse = 64 << 20

// WithSpool spools bodies larger than threshold bytes (default
// DefaultSpoolThreshold; <= 0 keeps it) to files in dir ("" default:
// os.TempDir(), which honours TMPDIR).
func WithSpool(dir string, threshold int64) Option {
	return func(f *Fetcher) {
		f.spoolDir = dir
		if threshold > 0 {
			f.spoolAt = threshold
		}
	}
}

// body is a response body as read: in memory (mem), or spooled (file),
// with mem then holding its first bytes, for parsing.
type body struct {
	mem       []byte
	file      *page.Spool
	truncated bool
}

// setBody gives pg the body, and returns the bytes to parse for links:
// the body, or a spooled one's first bytes.
func (b body) setBody(pg *page.Page) []byte {
	pg.Truncated = b.truncated
	if b.file != nil {
		pg.BodyFile = b.file
	} else {
		pg.Body = b.mem
	}
	return b.mem
}

// readBody reads r, at most limit bytes (<= 0: no cap); truncated is set
// when r had more. A body that fits f.spoolAt bytes is read into memory
// as readCapped does; with dl a larger one is spooled, with its first
// bytes kept in mem, and each byte past them moves dl on. On error no
// spool is left open.
func (f *Fetcher) readBody(r io.Reader, limit, hint int64, dl *deadline) (body, error) {
	if dl == nil || (limit > 0 && limit <= f.spoolAt) {
		b, truncated, err := readCapped(r, limit, hint)
		return body{mem: b, truncated: truncated}, err
	}
	head, more, err := readCapped(r, f.spoolAt, hint)
	if err != nil || !more {
		return body{mem: head}, err
	}
	// readCapped read one byte past spoolAt to see there was more; it
	// is still in head's array.
	head = head[:len(head)+1]
	sp, err := page.CreateSpool(f.spoolDir)
	if err != nil {
		return body{}, err
	}
	b, err := spoolRest(sp, head, &earningReader{r: r, dl: dl}, limit)
	if err != nil {
		sp.Close()
		return body{}, err
	}
	b.mem = head[:f.spoolAt]
	return b, nil
}

// spoolRest writes head and the rest of r to sp, at most limit bytes in
// all (<= 0: no cap), and seals it.
func spoolRest(sp *page.Spool, head []byte, r io.Reader, limit int64) (body, error) {
	if _, err := sp.Write(head); err != nil {
		return body{}, fmt.Errorf("body spool: %w", err)
	}
	rest := r
	if limit > 0 {
		rest = io.LimitReader(r, limit-int64(len(head)))
	}
	if _, err := io.Copy(sp, rest); err != nil {
		return body{}, err
	}
	b := body{file: sp}
	if limit > 0 {
		// One byte more says the body was longer than the cap; the
		// rest is never transferred.
		var one [1]byte
		n, _ := io.ReadFull(r, one[:])
		b.truncated = n == 1
	}
	sp.Seal()
	return b, nil
}

// parseLimit is how much of a decoded body is parsed for links.
func (f *Fetcher) parseLimit() int64 {
	if f.cfg.BodyCap > 0 {
		return min(f.cfg.BodyCap, maxParse)
	}
	return f.spoolAt
}

// Package page holds the record of one fetch, as the fetcher makes it and
// the sinks store it: the raw response, with no parsing or cleaning, so
// that cleaning can be redone without crawling again. It imports nothing but the standard library,
// so that what needs the record does not link the sinks' drivers.
package page

import (
	"bytes"
	"io"
	"time"
)

// Page is one fetch outcome: a page the server answered, or a permanent
// failure (Status 0 and Err set) recorded the same way.
type Page struct {
	// URL is the URL as requested, normalized; it is the record key.
	URL      string
	Campaign string
	Status   int
	// Header is the raw response header block as received, one
	// "Name: value\r\n" line each, without the status line.
	Header []byte
	// StatusLine is the raw status line, e.g. "HTTP/1.1 200 OK".
	StatusLine string
	// Request is the raw request as sent (request line and headers), for
	// WARC request records.
	Request []byte
	// Body is the body as the server sent it: chunked transfer coding
	// removed, Content-Encoding (gzip, br, ...) kept. It is empty when
	// BodyFile holds the body.
	Body []byte
	// BodyFile, when set, holds the body instead of Body: one larger than
	// the fetcher's in-memory threshold, spooled to a file as it arrived.
	// Read it through BodyReader, BodySize and BodyDigest; whoever holds
	// the page calls Release once every sink has stored it (or failed).
	BodyFile        *Spool
	ContentType     string
	ContentEncoding string
	// Truncated is set when the body (or its decoded form) hit the
	// campaign's body cap.
	Truncated bool
	FetchedAt time.Time
	Depth     int
	Parent    string
	// IP is the address the connection went to.
	IP string
	// Err is the reason of a permanent failure (Status 0).
	Err string
	// Revisit, when set, makes the record a revisit of an earlier capture
	// whose content this fetch found unchanged: Body is empty.
	Revisit *Revisit
	// WARC, when set, is where a WARC sink stored the page's response
	// record; it is set by that sink's Store, before the campaign's other
	// sinks store a page whose body they do not take (see sink.Multi).
	WARC *WARCLocation
	// Stored, when set, collects where each sink stored the page (the
	// crawl log's locations): the caller sets a new one before each Store
	// and reads it only once Store returned nil (a sink may add to it
	// before a write that then fails).
	Stored *Locations
}

// WARCLocation is a record's place in a WARC file: the file's base name
// (the sink's directory is the worker's) and the record's gzip member
// offset, as a CDXJ line gives them.
type WARCLocation struct {
	File   string
	Offset int64
}

// BodySize is the body's length in bytes, in memory or spooled.
func (p *Page) BodySize() int64 {
	if p.BodyFile != nil {
		return p.BodyFile.Size()
	}
	return int64(len(p.Body))
}

// BodyDigest is the body's payload digest (PayloadDigest), in memory or
// spooled (computed as it was spooled).
func (p *Page) BodyDigest() string {
	if p.BodyFile != nil {
		return p.BodyFile.Digest()
	}
	return PayloadDigest(p.Body)
}

// BodyReader reads the body from its start; each call is independent.
func (p *Page) BodyReader() io.Reader {
	if p.BodyFile != nil {
		return p.BodyFile.Reader()
	}
	return bytes.NewReader(p.Body)
}

// Release frees the spooled body, if any; the page keeps its other
// fields. It is idempotent, and nil-safe.
func (p *Page) Release() error {
	if p == nil || p.BodyFile == nil {
		return nil
	}
	return p.BodyFile.Close()
}

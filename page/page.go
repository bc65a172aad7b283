// Package page holds the record of one fetch, as the fetcher makes it and
// the sinks store it: the raw response, with no parsing or cleaning, so
// that cleaning can be redone without crawling again. It imports nothing but the standard library,
// so that what needs the record does not link the sinks' drivers.
package page

import "time"

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
	// removed, Content-Encoding (gzip, br, ...) kept.
	Body            []byte
	ContentType     string
	ContentEncoding string
	// Truncated is set when Body (or its decoded form) hit the body cap.
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
	// Stored, when set, collects where each sink stored the page (the
	// crawl log's locations): the caller sets a new one before each Store
	// and reads it only once Store returned nil (a sink may add to it
	// before a write that then fails).
	Stored *Locations
}

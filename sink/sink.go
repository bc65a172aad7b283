// Package sink writes raw pages: the response as the server sent it, with no
// parsing, rewriting or cleaning, so that cleaning can be redone at any time
// without crawling again (DESIGN.md, "Raw output").
//
// A Sink is durable on return: Store returns nil only when the page can no
// longer be lost (Kafka acks=all, WARC file synced, PostgreSQL committed).
// The fetcher acks a URL's frontier delivery only after that, so a sink that
// returns early breaks the "no URL is lost" invariant.
package sink

import (
	"context"
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
}

// Sink stores pages durably. Implementations are safe for concurrent use and
// batch concurrent callers (many fetch goroutines call Store at once).
type Sink interface {
	// Store returns nil only when p is durable.
	Store(ctx context.Context, p *Page) error
	// Close flushes and releases the sink; Store must not be called after.
	Close() error
}

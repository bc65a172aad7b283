// Package sink writes raw pages: the response as the server sent it, with no
// parsing, rewriting or cleaning, so that cleaning can be redone at any time
// without crawling again.
//
// A Sink is durable on return: Store returns nil only when the page can no
// longer be lost (Kafka acks=all, WARC file synced, PostgreSQL committed).
// The fetcher acks a URL's frontier delivery only after that, so a sink that
// returns early breaks the "no URL is lost" invariant.
package sink

import (
	"context"

	"github.com/drover-crawl/drover/page"
)

// Sink stores pages durably. Implementations are safe for concurrent use and
// batch concurrent callers (many fetch goroutines call Store at once).
type Sink interface {
	// Store returns nil only when p is durable.
	Store(ctx context.Context, p *page.Page) error
	// Close flushes and releases the sink; Store must not be called after.
	Close() error
}

// DefaultMaxBody is the largest body a Kafka record or PostgreSQL row
// carries when neither the sink URI (max_body=) nor the campaign's
// body_cap says: the campaign default body cap before bodies had no cap.
const DefaultMaxBody = 1 << 20

// MaxMaxBody is the largest max_body= a sink URI takes (PostgreSQL's
// bytea holds at most 1 GB).
const MaxMaxBody = 1 << 30

// BodyTooLarge is the body-omitted value (Kafka header, PostgreSQL
// column) of a record whose body was larger than its sink's max_body:
// the record carries the body's size and digest, and where a WARC sink
// stored it, instead of the body.
const BodyTooLarge = "too-large"

// bodyLimited is a sink that stores a body only up to BodyLimit bytes,
// and a pointer to where a WARC sink stored it above that (Multi orders
// the stores).
type bodyLimited interface{ BodyLimit() int64 }

// bodyPlacer is a sink that says whether it keeps any body and says where
// (page.Page.WARC).
type bodyPlacer interface{ placesBody() bool }

// positiveOr is v, or def when v is not positive: a setting left at zero
// (or set to nonsense below it) takes its default.
func positiveOr[T ~int | ~int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

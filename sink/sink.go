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

// positiveOr is v, or def when v is not positive: a setting left at zero
// (or set to nonsense below it) takes its default.
func positiveOr[T ~int | ~int64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

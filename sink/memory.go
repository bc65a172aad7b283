package sink

import (
	"context"
	"io"
	"sync"

	"github.com/drover-crawl/drover/page"
)

// Memory is an in-memory Sink for tests of the sink's users: it records a
// deep copy of every stored page. It is not durable and is never returned by
// Open.
type Memory struct {
	mu     sync.Mutex
	pages  []page.Page
	err    error
	closed bool
}

// NewMemory returns an empty Memory sink.
func NewMemory() *Memory { return &Memory{} }

// Store records a copy of p, or returns the error set by FailWith (without
// recording p), or ErrClosed after Close.
func (m *Memory) Store(ctx context.Context, p *page.Page) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if m.err != nil {
		return m.err
	}
	c := *p
	c.Header = clone(p.Header)
	c.Request = clone(p.Request)
	c.Body = clone(p.Body)
	if p.BodyFile != nil {
		// The spool is released once stored: keep the bytes.
		b, err := io.ReadAll(p.BodyReader())
		if err != nil {
			return err
		}
		c.Body, c.BodyFile = b, nil
	}
	if p.Revisit != nil {
		r := *p.Revisit
		c.Revisit = &r
	}
	m.pages = append(m.pages, c)
	return nil
}

// FailWith makes every later Store return err (nil restores success), to
// test that a caller does not ack what the sink refused.
func (m *Memory) FailWith(err error) {
	m.mu.Lock()
	m.err = err
	m.mu.Unlock()
}

// Pages returns a copy of the pages stored so far, in Store order.
func (m *Memory) Pages() []page.Page {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]page.Page(nil), m.pages...)
}

// Close makes later Stores fail with ErrClosed; the pages stay readable.
func (m *Memory) Close() error {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return nil
}

func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}

package sink

import (
	"context"
	"sync"
)

// batcher is a group commit: concurrent Store calls hand their page to one of
// a few worker goroutines, which takes every page that is waiting at that
// moment (up to max) and makes them durable with one flush (one fsync, one
// COPY). While a flush runs, the next callers queue up and form the next
// batch, so the batch size follows the load with no timer and no added
// latency for a lone caller.
type batcher struct {
	reqs  chan *batchItem // unbuffered: a send succeeds only when a worker takes it
	quit  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	max   int
	flush func(worker int, pages []*Page) []error
}

type batchItem struct {
	p    *Page
	done chan error // buffered (1): the worker never blocks on a caller that gave up
}

// newBatcher starts workers goroutines. flush returns one error per page (or
// a nil slice when all succeeded); it must not keep the slice.
func newBatcher(workers, max int, flush func(worker int, pages []*Page) []error) *batcher {
	b := &batcher{reqs: make(chan *batchItem), quit: make(chan struct{}), max: max, flush: flush}
	for i := range workers {
		b.wg.Add(1)
		go b.run(i)
	}
	return b
}

// store waits until p's batch is flushed, ctx is done or the batcher closes.
// When ctx ends first the page may still be written later: the caller sees an
// error and retries, which costs a duplicate, never a loss.
func (b *batcher) store(ctx context.Context, p *Page) error {
	it := &batchItem{p: p, done: make(chan error, 1)}
	select {
	case b.reqs <- it:
	case <-b.quit:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-it.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *batcher) run(worker int) {
	defer b.wg.Done()
	items := make([]*batchItem, 0, b.max)
	pages := make([]*Page, 0, b.max)
	for {
		select {
		case it := <-b.reqs:
			items = append(items[:0], it)
		case <-b.quit:
			return
		}
	drain:
		for len(items) < b.max {
			select {
			case it := <-b.reqs:
				items = append(items, it)
			default:
				break drain
			}
		}
		pages = pages[:0]
		for _, it := range items {
			pages = append(pages, it.p)
		}
		errs := b.flush(worker, pages)
		for i, it := range items {
			var err error
			if errs != nil {
				err = errs[i]
			}
			it.done <- err
		}
		clear(items)
		clear(pages)
	}
}

// close stops the workers after their current batch; callers still waiting
// to hand over a page get ErrClosed.
func (b *batcher) close() {
	b.once.Do(func() { close(b.quit) })
	b.wg.Wait()
}

// allErr returns n copies of err, the result of a flush that failed as a whole.
func allErr(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

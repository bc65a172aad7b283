package sink

import (
	"context"
	"sync"
)

// batcher is a group commit: concurrent Store calls hand their page to one of
// a few worker goroutines, which takes every page that is waiting at that
// moment (up to max pages, and up to maxBatchBytes unless one page alone is
// larger) and makes them durable with one flush (one fsync, one COPY). While a flush runs, the next callers queue up and form the next
// batch, so the batch size follows the load with no timer and no added
// latency for a lone caller.
type batcher[T any] struct {
	reqs  chan *batchItem[T] // unbuffered: a send succeeds only when a worker takes it
	quit  chan struct{}
	once  sync.Once
	wg    sync.WaitGroup
	max   int
	size  func(T) int // bytes of one item, against maxBatchBytes
	flush func(worker int, items []T) []error
}

// maxBatchBytes bounds one flush. The sessions of a campaign in a worker
// process share its sinks: up to max pages from all of them can be
// waiting, and at a 1 MiB body cap 256 pages would be a 256 MiB COPY or
// write+fsync, each of its Stores waiting for all of it (about what one
// session's 32 fetch slots could hand over before sinks were shared).
const maxBatchBytes = 32 << 20

type batchItem[T any] struct {
	v    T
	done chan error // buffered (1): the worker never blocks on a caller that gave up
}

// newBatcher starts workers goroutines; size gives an item's bytes. flush
// returns one error per page (or a nil slice when all succeeded); it must
// not keep the slice.
func newBatcher[T any](workers, max int, size func(T) int, flush func(worker int, items []T) []error) *batcher[T] {
	b := &batcher[T]{reqs: make(chan *batchItem[T]), quit: make(chan struct{}), max: max, size: size, flush: flush}
	for i := range workers {
		b.wg.Add(1)
		go b.run(i)
	}
	return b
}

// store waits until v's batch is flushed, ctx is done or the batcher closes.
// When ctx ends first the page may still be written later: the caller sees an
// error and retries, which costs a duplicate, never a loss.
func (b *batcher[T]) store(ctx context.Context, v T) error {
	it := &batchItem[T]{v: v, done: make(chan error, 1)}
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

func (b *batcher[T]) run(worker int) {
	defer b.wg.Done()
	items := make([]*batchItem[T], 0, b.max)
	vals := make([]T, 0, b.max)
	for {
		var bytes int
		select {
		case it := <-b.reqs:
			items = append(items[:0], it)
			bytes = b.size(it.v)
		case <-b.quit:
			return
		}
	drain:
		for len(items) < b.max && bytes < maxBatchBytes {
			select {
			case it := <-b.reqs:
				items = append(items, it)
				bytes += b.size(it.v)
			default:
				break drain
			}
		}
		vals = vals[:0]
		for _, it := range items {
			vals = append(vals, it.v)
		}
		errs := b.flush(worker, vals)
		for i, it := range items {
			var err error
			if errs != nil {
				err = errs[i]
			}
			it.done <- err
		}
		clear(items)
		clear(vals)
	}
}

// close stops the workers after their current batch; callers still waiting
// to hand over a page get ErrClosed.
func (b *batcher[T]) close() {
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

package sink

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/await"
)

// queueWindow is how long the test gives ten goroutines, all started, to
// reach their send to the batcher's busy worker (a send blocks, so it
// cannot be observed): generous, since a goroutine late past it makes
// the test fail (its batches too small), not pass.
const queueWindow = 200 * time.Millisecond

// TestBatchStopsAtItsByteBound: pages waiting together are flushed in
// batches of at most maxBatchBytes (one page past it at most), however
// many the page bound (256) would allow.
func TestBatchStopsAtItsByteBound(t *testing.T) {
	gate, held := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	b := newBatcher(1, 256, func(n int) int { return n }, func(_ int, items []int) []error {
		mu.Lock()
		batches = append(batches, append([]int(nil), items...))
		n := len(batches)
		mu.Unlock()
		if n == 1 {
			close(held)
			<-gate // the others queue up meanwhile
		}
		return nil
	})
	defer b.close()

	const page, waiting = 8 << 20, 10 // four pages are one bound's worth
	var wg sync.WaitGroup
	var started atomic.Int32
	store := func(n int) {
		defer wg.Done()
		started.Add(1)
		if err := b.store(context.Background(), n); err != nil {
			t.Error(err)
		}
	}
	wg.Add(1)
	go store(1)
	<-held
	for range waiting {
		wg.Add(1)
		go store(page)
	}
	await.For(t, 5*time.Second, time.Millisecond, "every store goroutine started", func() error {
		if n := started.Load(); n < waiting+1 {
			return fmt.Errorf("%d of %d started", n, waiting+1)
		}
		return nil
	})
	time.Sleep(queueWindow)
	close(gate)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, batch := range batches[1:] {
		bytes := 0
		for _, n := range batch {
			bytes += n
		}
		if bytes > maxBatchBytes+page {
			t.Errorf("a batch of %d pages, %d MiB: over the %d MiB bound by more than one page", len(batch), bytes>>20, maxBatchBytes>>20)
		}
		total += len(batch)
	}
	if total != waiting {
		t.Fatalf("%d pages flushed after the first, want %d", total, waiting)
	}
	if got := len(batches[1]); got < maxBatchBytes/page {
		t.Fatalf("the batch after the gate held %d pages, want the %d that fill the bound: the pages were not queued when it opened (queueWindow too short for this machine?)", got, maxBatchBytes/page)
	}
}

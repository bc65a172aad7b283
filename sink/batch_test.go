package sink

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/await"
)

// TestBatchStopsAtItsByteBound: pages waiting together are flushed in
// batches of at most maxBatchBytes (one page past it at most), however
// many the page bound (256) would allow.
func TestBatchStopsAtItsByteBound(t *testing.T) {
	gate, held := make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	var batches [][]int
	b := newBatcher(0, 256, func(n int) int { return n }, func(_ int, items []int) []error {
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
	const page, waiting = 8 << 20, 10 // four pages are one bound's worth
	// A store blocked on the unbuffered hand-over cannot be observed; a
	// buffer of room for every page makes a handed-over page countable
	// (len(b.reqs)), and the worker drains it as it drains blocked senders.
	// The worker starts after the swap.
	b.reqs = make(chan *batchItem[int], waiting)
	b.wg.Add(1)
	go b.run(0)
	defer b.close()
	var open sync.Once
	openGate := func() { open.Do(func() { close(gate) }) }
	defer openGate() // before close: a failed wait leaves no worker held

	var wg sync.WaitGroup
	store := func(n int) {
		defer wg.Done()
		assert.NoError(t, b.store(context.Background(), n))
	}
	wg.Add(1)
	go store(1)
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the first page's batch was not flushed")
	}
	for range waiting {
		wg.Add(1)
		go store(page)
	}
	await.For(t, 5*time.Second, time.Millisecond, "every page queued while the first batch is held", func() error {
		if n := len(b.reqs); n < waiting {
			return fmt.Errorf("%d of %d queued", n, waiting)
		}
		return nil
	})
	openGate()
	stored := make(chan struct{})
	go func() { wg.Wait(); close(stored) }()
	select {
	case <-stored:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the queued pages were not all stored after the gate opened")
	}

	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, batch := range batches[1:] {
		bytes := 0
		for _, n := range batch {
			bytes += n
		}
		assert.LessOrEqualf(t, bytes, maxBatchBytes+page, "a batch of %d pages, %d MiB: over the %d MiB bound by more than one page", len(batch), bytes>>20, maxBatchBytes>>20)
		total += len(batch)
	}
	require.Equal(t, waiting, total, "pages flushed after the first")
	require.GreaterOrEqualf(t, len(batches[1]), maxBatchBytes/page, "pages the batch after the gate held, want the %d that fill the bound", maxBatchBytes/page)
}

package fetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// largeBodyRate is the pace a body over the spool threshold is given
// beyond Timeouts.Response: each byte received moves the fetch's deadline
// on by 1/largeBodyRate s. A 300 MiB body that arrives at 1 MiB/s or
// faster is fetched whole whatever its length; one that stalls runs out
// of the time it earned.
const largeBodyRate = 1 << 20

// errResponseTimeout is a fetch's cause when its deadline passed; it is a
// context.DeadlineExceeded, so that Classify reads it as a timeout.
var errResponseTimeout = fmt.Errorf("response timeout: %w", context.DeadlineExceeded)

// deadline cancels a fetch's context when it passes: at first
// Timeouts.Response after the start, moved on by earn as a large body
// arrives.
type deadline struct {
	mu    sync.Mutex
	at    time.Time
	timer *time.Timer
}

// withDeadline is ctx cancelled, with cause errResponseTimeout, d from
// now unless the returned deadline is moved on; stop releases it.
func withDeadline(ctx context.Context, d time.Duration) (context.Context, *deadline, func()) {
	fctx, cancel := context.WithCancelCause(ctx)
	dl := &deadline{at: time.Now().Add(d)}
	dl.timer = time.AfterFunc(d, func() { cancel(errResponseTimeout) })
	return fctx, dl, func() {
		dl.timer.Stop()
		cancel(nil)
	}
}

// earn moves the deadline on by the time n more bytes of body earn. A
// deadline that has passed stays passed.
func (dl *deadline) earn(n int) {
	if dl == nil || n <= 0 {
		return
	}
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.at = dl.at.Add(time.Duration(n) * time.Second / largeBodyRate)
	if dl.timer.Stop() { // not fired yet
		dl.timer.Reset(time.Until(dl.at))
	}
}

// timeoutCause is err, or errResponseTimeout when err is ctx's
// cancellation by its deadline (the HTTP client says only "context
// canceled").
func timeoutCause(ctx context.Context, err error) error {
	if err != nil && errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), errResponseTimeout) {
		return errResponseTimeout
	}
	return err
}

// earningReader moves dl on as it reads.
type earningReader struct {
	r  io.Reader
	dl *deadline
}

func (e *earningReader) Read(b []byte) (int, error) {
	n, err := e.r.Read(b)
	e.dl.earn(n)
	return n, err
}

// Package await is drover's one polling helper: wait until a condition
// holds, or check that it keeps holding, with every wait bounded. Tests
// use For and Holds, which fail the test naming the condition and the
// last value observed; code that is not a test (the chaos rig, the
// benchmarks, the dev stack) uses Until, which returns the same as an
// error.
//
// A condition is a func returning nil when it holds, or an error that says
// what was observed instead ("3 of 16 sessions open"): that error is what
// a timeout reports.
package await

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrFinal, wrapped in a condition's error, ends Until at once: waiting
// longer will not change the answer (a campaign that failed will not
// complete).
var ErrFinal = errors.New("final")

// Until calls cond every interval until it returns nil, and returns nil.
// It returns cond's last error, wrapped with the time waited, once timeout
// has passed or ctx has ended, and at once when that error wraps ErrFinal.
func Until(ctx context.Context, timeout, interval time.Duration, cond func() error) error {
	start := time.Now()
	deadline := start.Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrFinal) {
			return err
		}
		if ctx.Err() != nil || !time.Now().Before(deadline) {
			return fmt.Errorf("after %s: %w", time.Since(start).Round(time.Millisecond), err)
		}
		t := time.NewTimer(min(interval, time.Until(deadline)))
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// T is the part of testing.TB that For and Holds use.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
}

// For calls cond every interval until it returns nil, and returns the time
// it held. After timeout it fails t with what it waited for and cond's
// last error (the last value observed).
func For(t T, timeout, interval time.Duration, what string, cond func() error) time.Time {
	t.Helper()
	if err := Until(context.Background(), timeout, interval, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
	return time.Now()
}

// Holds calls cond every interval for d, and fails t with what should have
// held and cond's error at the first call that returns one: a condition
// that must stay true for a while (a paused campaign stays quiet), checked
// without a bare sleep and failing at the first breach.
func Holds(t T, d, interval time.Duration, what string, cond func() error) {
	t.Helper()
	start := time.Now()
	for {
		if err := cond(); err != nil {
			t.Fatalf("%s held only %s of %s: %v", what, time.Since(start).Round(time.Millisecond), d, err)
		}
		left := d - time.Since(start)
		if left <= 0 {
			return
		}
		time.Sleep(min(interval, left))
	}
}

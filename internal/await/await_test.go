package await

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fakeT records For's and Holds's failures instead of failing the test.
type fakeT struct{ failed string }

func (f *fakeT) Helper() {}

// Fatalf records the message and ends the goroutine, as testing.T does.
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	panic(f)
}

func run(f *fakeT, fn func()) (failed string) {
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
		failed = f.failed
	}()
	fn()
	return ""
}

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	n := 0
	err := Until(context.Background(), time.Second, time.Millisecond, func() error {
		if n++; n < 3 {
			return fmt.Errorf("n = %d", n)
		}
		return nil
	})
	require.Falsef(t, err != nil || n != 3, "Until: %v after %d calls, want nil after 3", err, n)
}

func TestUntilTimesOutWithTheLastError(t *testing.T) {
	n := 0
	err := Until(context.Background(), 50*time.Millisecond, 5*time.Millisecond, func() error {
		n++
		return fmt.Errorf("n = %d", n)
	})
	require.Falsef(t, err == nil || !strings.HasSuffix(err.Error(), fmt.Sprintf(": n = %d", n)), "Until: %v, want the last error (n = %d)", err, n)
}

func TestUntilStopsAtAFinalError(t *testing.T) {
	n := 0
	err := Until(context.Background(), time.Minute, time.Millisecond, func() error {
		n++
		return fmt.Errorf("%w: failed", ErrFinal)
	})
	require.Falsef(t, !errors.Is(err, ErrFinal) || n != 1, "Until: %v after %d calls, want ErrFinal after 1", err, n)
}

func TestUntilStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Until(ctx, time.Minute, 5*time.Millisecond, func() error { return errors.New("never") })
	require.Falsef(t, err == nil || time.Since(start) > 10*time.Second, "Until: %v after %s, want an error soon after the context ends", err, time.Since(start))
}

func TestForFailsNamingTheConditionAndTheLastValue(t *testing.T) {
	f := &fakeT{}
	failed := run(f, func() {
		For(f, 20*time.Millisecond, time.Millisecond, "16 sessions", func() error { return errors.New("3 sessions open") })
	})
	require.Falsef(t, !strings.Contains(failed, "16 sessions") || !strings.Contains(failed, "3 sessions open"), "For failed with %q, want the condition and the last value", failed)
}

func TestHoldsFailsAtTheFirstBreach(t *testing.T) {
	f := &fakeT{}
	n := 0
	start := time.Now()
	failed := run(f, func() {
		Holds(f, time.Minute, time.Millisecond, "paused", func() error {
			if n++; n == 3 {
				return errors.New("a request started")
			}
			return nil
		})
	})
	require.Falsef(t, !strings.Contains(failed, "paused") || !strings.Contains(failed, "a request started") || n != 3 || time.Since(start) > 10*time.Second,
		"Holds failed with %q after %d calls, want the breach at the third", failed, n)
	f = &fakeT{}
	failed = run(f, func() { Holds(f, 10*time.Millisecond, time.Millisecond, "quiet", func() error { return nil }) })
	require.Emptyf(t, failed, "Holds failed with %q while the condition held", failed)
}

package campaign

import (
	"testing"
	"time"
)

// TestRunsSortInStartOrder: a run started later is after every earlier
// one, whatever its random part, and a key without a run is before all.
func TestRunsSortInStartOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)
	prev := Config{ID: "news"}.FrontierKey()
	if prev != "news" {
		t.Fatalf("key without a run = %q, want the ID", prev)
	}
	for i, r := range []uint64{0, 1<<64 - 1, 7, 36*36*36*36 - 1, 36 * 36 * 36 * 36} {
		c := Config{ID: "news", Run: NewRun(t0.Add(time.Duration(i)*time.Millisecond), r)}
		if err := c.WithDefaults().validRun(); err != nil {
			t.Fatalf("run %q: %v", c.Run, err)
		}
		key := c.FrontierKey()
		if !RunAfter(key, prev) || RunAfter(prev, key) {
			t.Errorf("run %s (started %d ms later) is not after %s", key, i, prev)
		}
		if KeyID(key) != "news" {
			t.Errorf("KeyID(%q) = %q", key, KeyID(key))
		}
		prev = key
	}
}

package frontier

import (
	"testing"
	"time"
)

// A campaign that reserved a slot and never came for it holds the host's
// pace back once, not for good: the other campaign's starts, reported as
// they come, soon go a delay apart again.
func TestHostClockDropsAStaleReservation(t *testing.T) {
	c := newHostClocks()
	const d = 100 * time.Millisecond
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	if at := c.slot("h", "a", d, t0); !at.Equal(t0) {
		t.Fatalf("a's first start %s, want now", at)
	}
	if at := c.slot("h", "b", d, t0.Add(time.Millisecond)); !at.Equal(t0.Add(d)) {
		t.Fatalf("b's slot %s, want a delay after a's", at)
	}
	// b never comes back; a goes on alone, a delay apart.
	now := t0.Add(d)
	var starts []time.Time
	for range 40 {
		at := c.slot("h", "a", d, now)
		if at.After(now) {
			now = at
			at = c.slot("h", "a", d, now)
		}
		starts = append(starts, at)
		// Its outcome reports the start a little after the lease.
		c.started("h", at.Add(5*time.Millisecond), d, at.Add(20*time.Millisecond))
		now = at.Add(d)
	}
	// A delay after the reported start (5 ms after the lease), not two.
	last := starts[len(starts)-1].Sub(starts[len(starts)-2])
	if last != d+5*time.Millisecond {
		t.Errorf("a's starts end %s apart, want %s: b's old reservation still holds slots", last, d+5*time.Millisecond)
	}
}

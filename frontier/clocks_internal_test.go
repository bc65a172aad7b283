package frontier

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A campaign that reserved a slot and never came for it holds the host's
// pace back once, not for good: the other campaign's starts, reported as
// they come, soon go a delay apart again.
func TestHostClockDropsAStaleReservation(t *testing.T) {
	c := newHostClocks()
	const d = 100 * time.Millisecond
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	// The clock, made a delay ago, reserved its first start for a.
	at := c.slot("h", "a", d, t0.Add(-d))
	require.True(t, at.Equal(t0), "a's first slot %s, want a delay after the clock was made", at)
	at = c.slot("h", "a", d, t0)
	require.True(t, at.Equal(t0), "a's first start %s, want now", at)
	at = c.slot("h", "b", d, t0.Add(time.Millisecond))
	require.True(t, at.Equal(t0.Add(d)), "b's slot %s, want a delay after a's", at)
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
	assert.Equal(t, d+5*time.Millisecond, last, "a's starts end apart: b's old reservation still holds slots")
}

// A clock a scheduler makes counts a start at once: the first request to
// a key it did not know waits a delay, since another scheduler, or this
// one before a restart, may have given the key a start a moment ago. It
// does again once the clock was dropped, idle.
func TestNewHostClockWaitsADelay(t *testing.T) {
	c := newHostClocks()
	const d = time.Second
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, key := range []string{"example.org", "domain:example.org", "ip:127.0.0.1"} {
		at := c.slot(key, "a", d, t0)
		assert.True(t, at.Equal(t0.Add(d)), "%s: the first slot %s, want a delay after the clock was made (%s)", key, at, t0.Add(d))
		at = c.slot(key, "a", d, t0.Add(d))
		assert.True(t, at.Equal(t0.Add(d)), "%s: coming back for the slot at %s: %s, want it taken", key, t0.Add(d), at)
	}
	later := t0.Add(d + clockIdle + time.Minute)
	c.shard("example.org").sweep(later)
	at := c.slot("example.org", "a", d, later)
	assert.True(t, at.Equal(later.Add(d)), "after the idle clock was dropped: %s, want a delay on (%s)", at, later.Add(d))
}

// A host paced slower than clockIdle (a Crawl-delay of an hour) keeps its
// clock from one request to the next: a new clock would make it wait a
// second hour. Idle past its delay and clockIdle, it is dropped.
func TestSlowHostKeepsItsClock(t *testing.T) {
	c := newHostClocks()
	const d = time.Hour
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	c.slot("slow.example", "a", d, t0)
	at := c.slot("slow.example", "a", d, t0.Add(d))
	require.True(t, at.Equal(t0.Add(d)), "the first start %s, want %s", at, t0.Add(d))
	next := t0.Add(2*d + time.Minute) // a minute late
	c.shard("slow.example").sweep(next)
	at = c.slot("slow.example", "a", d, next)
	assert.True(t, at.Equal(next), "the second start %s, want now (%s): the clock was dropped between two requests", at, next)
	later := next.Add(d + clockIdle + time.Second)
	c.shard("slow.example").sweep(later)
	at = c.slot("slow.example", "a", d, later)
	assert.True(t, at.Equal(later.Add(d)), "after %s idle: %s, want a new clock's delay (%s)", d+clockIdle, at, later.Add(d))
}

// Two campaigns share a key's clock and come for their slots late at
// random (their hosts waited for a session's credit): every two starts
// the clock gives stay the delay apart, and each campaign still gets its
// turns. A late campaign once started at once, however recently the other
// had started.
func TestHostClockLateReservations(t *testing.T) {
	const d = time.Second
	least := 1.0 // the smallest share a campaign got
	defer func() { t.Logf("the smallest share of a campaign over 20 runs of 200 starts: %.0f%%", 100*least) }()
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 31))
		c := newHostClocks()
		t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		late := func() time.Duration {
			if rng.IntN(3) == 0 {
				return time.Duration(rng.Int64N(int64(3 * d / 2)))
			}
			return 0
		}
		campaigns := []string{"a", "b"}
		ask := []time.Time{t0.Add(late()), t0.Add(late())} // when each asks next
		var starts []time.Time
		n := map[string]int{}
		for len(starts) < 200 {
			i := 0
			if ask[1].Before(ask[0]) || (ask[1].Equal(ask[0]) && rng.IntN(2) == 0) {
				i = 1
			}
			now := ask[i]
			at := c.slot("domain:example.org", campaigns[i], d, now)
			if at.After(now) {
				ask[i] = at.Add(late()) // its host waits for the slot
				continue
			}
			starts = append(starts, now)
			n[campaigns[i]]++
			ask[i] = now.Add(d).Add(late()) // its own host's delay
		}
		slices.SortFunc(starts, time.Time.Compare)
		for j := 1; j < len(starts); j++ {
			gap := starts[j].Sub(starts[j-1])
			require.GreaterOrEqual(t, gap, d, "seed %d: starts %d and %d %s apart, want at least %s", seed, j-1, j, gap, d)
		}
		for _, cp := range campaigns {
			share := float64(n[cp]) / float64(len(starts))
			least = min(least, share)
			assert.GreaterOrEqual(t, share, 0.4, "seed %d: campaign %s got %d of %d starts (%.0f%%)", seed, cp, n[cp], len(starts), 100*share)
		}
	}
}

// A clock keeps no map of reservations once the last is taken or dropped
// as stale: a scheduler keeps a clock per active host, and the empty maps
// it kept were a third of its memory at 100,000 hosts after the crawl.
func TestHostClockLetsItsReservationsGo(t *testing.T) {
	c := newHostClocks()
	const d = 100 * time.Millisecond
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	c.slot("h", "a", d, t0.Add(-d))
	require.True(t, c.slot("h", "a", d, t0).Equal(t0), "a's first start")
	hc := c.shard("h").clocks["h"]
	at := c.slot("h", "b", d, t0.Add(time.Millisecond))
	require.True(t, at.Equal(t0.Add(d)), "b's slot %s, want a delay after a's start", at)
	require.Len(t, hc.res, 1, "b's reservation")
	require.True(t, c.slot("h", "b", d, at).Equal(at), "b coming for its slot")
	require.Nil(t, hc.res, "the map of reservations after the last was taken")

	next := c.slot("h", "a", d, at.Add(time.Millisecond))
	require.Len(t, hc.res, 1, "a's reservation at %s", next)
	c.slot("h", "b", d, next.Add(time.Minute)) // a never came: stale
	require.Nil(t, hc.res, "the map of reservations after the last went stale")
}

package frontier

import (
	"container/heap"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Ready hosts of one priority go in turns: those in a turn first, the
// earliest turn first, then the others by their head URL's age. A turn
// ends after HostTurn leases, or once the host had no lease for
// HostTurnIdle, and the host then competes by its head URL's age again.
// A higher priority goes first whatever the turns.
func TestReadyHostsTakeTurns(t *testing.T) {
	a := leaser{&campaignActor{}}
	mk := func(name string, seq uint64) *host {
		return &host{name: name, queue: entryHeap{{seq: seq}}, index: -1}
	}
	old, b, c := mk("old", 1), mk("b", 2), mk("c", 3)
	order := func() []string {
		ready := hostHeap{ready: true}
		for _, h := range []*host{old, b, c} {
			heap.Push(&ready, h)
		}
		var names []string
		for ready.Len() > 0 {
			names = append(names, heap.Pop(&ready).(*host).name)
		}
		return names
	}
	require.Equal(t, []string{"old", "b", "c"}, order(), "with no turn, by their head URL's age")

	a.takeTurn(c)
	a.takeTurn(b)
	require.Equal(t, []string{"c", "b", "old"}, order(), "the hosts in a turn first, the earliest turn first")

	for range HostTurn - 1 {
		a.takeTurn(b)
	}
	require.Zero(t, b.turnLeft, "b's leases left in its turn")
	require.Equal(t, []string{"c", "old", "b"}, order(), "b after its turn ended")
	a.takeTurn(b)
	require.Equal(t, []string{"c", "b", "old"}, order(), "b in a turn again, after c's")

	old.best = 1
	require.Equal(t, []string{"old", "c", "b"}, order(), "a higher priority first")
	old.best = 0

	// A host with no lease for HostTurnIdle loses its turn: c, leased at
	// t0 (its next start a delay after), is in it until then.
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	c.next = t0.Add(time.Millisecond)
	c.endIdleTurn(c.next.Add(HostTurnIdle))
	require.Equal(t, []string{"c", "b", "old"}, order(), "c idle for HostTurnIdle, not longer")
	c.endIdleTurn(c.next.Add(HostTurnIdle + time.Millisecond))
	require.Zero(t, c.turnLeft, "c's leases left in its turn after it was idle longer")
	require.Equal(t, []string{"b", "old", "c"}, order(), "c idle past HostTurnIdle, behind the older URLs")
}

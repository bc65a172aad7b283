package seen

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// countingSeen counts the keys Queued asks of the store, and fails marks
// on demand.
type countingSeen struct {
	Store
	asked    int
	failMark error
}

func (s *countingSeen) Queued(c string, keys []Key) ([]bool, error) {
	s.asked += len(keys)
	return s.Store.Queued(c, keys)
}

func (s *countingSeen) MarkQueued(c string, keys []Key) error {
	if s.failMark != nil {
		return s.failMark
	}
	return s.Store.MarkQueued(c, keys)
}

func keysN(prefix string, n int) []Key {
	ks := make([]Key, n)
	for i := range ks {
		ks[i] = KeyOf(fmt.Sprintf("http://%s.example/%d", prefix, i))
	}
	return ks
}

func TestQueuedCacheAnswersKnownKeys(t *testing.T) {
	store := &countingSeen{Store: NewMemory()}
	c := NewQueuedCache(store)
	ks := keysN("a", 4)
	require.NoError(t, c.MarkQueued("c1", ks[:2]))
	require.NoError(t, c.MarkDone("c1", ks[2:3]))
	got, err := c.Queued("c1", ks)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprint([]bool{true, true, true, false}), fmt.Sprint(got), "Queued")
	require.Equal(t, 1, store.asked, "keys the store was asked (only the unknown one)")
	// Another campaign knows nothing of c1's keys.
	store.asked = 0
	got, _ = c.Queued("c2", ks[:1])
	if got[0] || store.asked != 1 {
		require.FailNow(t, fmt.Sprintf("c2: Queued = %v with %d asked, want false with 1", got, store.asked))
	}
	// A key the store says is queued (marked by someone else, or before a
	// restart) is remembered.
	require.NoError(t, store.Store.MarkQueued("c1", ks[3:]))
	c.Queued("c1", ks[3:])
	store.asked = 0
	if got, _ := c.Queued("c1", ks[3:]); !got[0] || store.asked != 0 {
		require.FailNow(t, fmt.Sprintf("after the store said queued: Queued = %v with %d asked, want true with 0", got, store.asked))
	}
}

func TestQueuedCacheFailedMarkIsNotRemembered(t *testing.T) {
	store := &countingSeen{Store: NewMemory(), failMark: errors.New("disk full")}
	c := NewQueuedCache(store)
	ks := keysN("b", 1)
	require.Error(t, c.MarkQueued("c1", ks), "MarkQueued: want the store's error")
	got, _ := c.Queued("c1", ks)
	require.False(t, got[0], "a key whose mark failed is said queued")
}

func TestQueuedCacheDropForgets(t *testing.T) {
	c := NewQueuedCache(NewMemory())
	ks := keysN("d", 3)
	require.NoError(t, c.MarkQueued("c1", ks))
	require.NoError(t, c.Drop("c1"))
	got, err := c.Queued("c1", ks)
	require.NoError(t, err)
	for i, q := range got {
		require.Falsef(t, q, "key %d said queued after Drop", i)
	}
}

// A mark racing a Drop is not remembered: the generation taken before the
// store call is no longer the campaign's.
func TestQueuedCacheMarkRacingDrop(t *testing.T) {
	c := NewQueuedCache(NewMemory())
	ks := keysN("r", 1)
	err := c.mark("c1", ks, func(campaign string, keys []Key) error {
		if err := c.Drop(campaign); err != nil { // arrives while the store is marking
			return err
		}
		return c.Store.MarkQueued(campaign, keys)
	})
	require.NoError(t, err)
	require.False(t, c.current("c1").has(ks[0]), "a mark taken before Drop was remembered after it")
}

func TestQueuedCacheIsBounded(t *testing.T) {
	store := &countingSeen{Store: NewMemory()}
	c := NewQueuedCache(store)
	ks := keysN("e", 2*queuedCacheGen+1)
	for i := 0; i < len(ks); i += 4096 {
		require.NoError(t, c.MarkQueued("c1", ks[i:min(i+4096, len(ks))]))
	}
	g := c.current("c1")
	require.LessOrEqual(t, len(g.cur)+len(g.prev), 2*queuedCacheGen, "keys the cache holds")
	// The oldest key left the cache; the store still knows it.
	store.asked = 0
	got, _ := c.Queued("c1", ks[:1])
	if !got[0] || store.asked != 1 {
		require.FailNow(t, fmt.Sprintf("oldest key: Queued = %v with %d asked, want true from the store", got, store.asked))
	}
}

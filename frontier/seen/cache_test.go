package seen

import (
	"errors"
	"fmt"
	"testing"
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
	if err := c.MarkQueued("c1", ks[:2]); err != nil {
		t.Fatal(err)
	}
	if err := c.MarkDone("c1", ks[2:3]); err != nil {
		t.Fatal(err)
	}
	got, err := c.Queued("c1", ks)
	if err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, true, false}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Queued = %v, want %v", got, want)
	}
	if store.asked != 1 {
		t.Fatalf("the store was asked %d keys, want 1 (only the unknown one)", store.asked)
	}
	// Another campaign knows nothing of c1's keys.
	store.asked = 0
	got, _ = c.Queued("c2", ks[:1])
	if got[0] || store.asked != 1 {
		t.Fatalf("c2: Queued = %v with %d asked, want false with 1", got, store.asked)
	}
	// A key the store says is queued (marked by someone else, or before a
	// restart) is remembered.
	if err := store.Store.MarkQueued("c1", ks[3:]); err != nil {
		t.Fatal(err)
	}
	c.Queued("c1", ks[3:])
	store.asked = 0
	if got, _ := c.Queued("c1", ks[3:]); !got[0] || store.asked != 0 {
		t.Fatalf("after the store said queued: Queued = %v with %d asked, want true with 0", got, store.asked)
	}
}

func TestQueuedCacheFailedMarkIsNotRemembered(t *testing.T) {
	store := &countingSeen{Store: NewMemory(), failMark: errors.New("disk full")}
	c := NewQueuedCache(store)
	ks := keysN("b", 1)
	if err := c.MarkQueued("c1", ks); err == nil {
		t.Fatal("MarkQueued: want the store's error")
	}
	if got, _ := c.Queued("c1", ks); got[0] {
		t.Fatal("a key whose mark failed is said queued")
	}
}

func TestQueuedCacheDropForgets(t *testing.T) {
	c := NewQueuedCache(NewMemory())
	ks := keysN("d", 3)
	if err := c.MarkQueued("c1", ks); err != nil {
		t.Fatal(err)
	}
	if err := c.Drop("c1"); err != nil {
		t.Fatal(err)
	}
	got, err := c.Queued("c1", ks)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range got {
		if q {
			t.Fatalf("key %d said queued after Drop", i)
		}
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
	if err != nil {
		t.Fatal(err)
	}
	if c.current("c1").has(ks[0]) {
		t.Fatal("a mark taken before Drop was remembered after it")
	}
}

func TestQueuedCacheIsBounded(t *testing.T) {
	store := &countingSeen{Store: NewMemory()}
	c := NewQueuedCache(store)
	ks := keysN("e", 2*queuedCacheGen+1)
	for i := 0; i < len(ks); i += 4096 {
		if err := c.MarkQueued("c1", ks[i:min(i+4096, len(ks))]); err != nil {
			t.Fatal(err)
		}
	}
	g := c.current("c1")
	if n := len(g.cur) + len(g.prev); n > 2*queuedCacheGen {
		t.Fatalf("cache holds %d keys, want at most %d", n, 2*queuedCacheGen)
	}
	// The oldest key left the cache; the store still knows it.
	store.asked = 0
	got, _ := c.Queued("c1", ks[:1])
	if !got[0] || store.asked != 1 {
		t.Fatalf("oldest key: Queued = %v with %d asked, want true from the store", got, store.asked)
	}
}

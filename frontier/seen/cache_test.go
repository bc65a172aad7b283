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
	c := NewQueuedCache(store, DefaultQueuedCacheBytes)
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
	c := NewQueuedCache(store, DefaultQueuedCacheBytes)
	ks := keysN("b", 1)
	require.Error(t, c.MarkQueued("c1", ks), "MarkQueued: want the store's error")
	got, _ := c.Queued("c1", ks)
	require.False(t, got[0], "a key whose mark failed is said queued")
}

func TestQueuedCacheDropForgets(t *testing.T) {
	c := NewQueuedCache(NewMemory(), DefaultQueuedCacheBytes)
	ks := keysN("d", 3)
	require.NoError(t, c.MarkQueued("c1", ks))
	require.NoError(t, c.Drop("c1"))
	got, err := c.Queued("c1", ks)
	require.NoError(t, err)
	for i, q := range got {
		require.Falsef(t, q, "key %d said queued after Drop", i)
	}
}

// A mark racing a Drop is not remembered: the store call began before the
// Drop.
func TestQueuedCacheMarkRacingDrop(t *testing.T) {
	c := NewQueuedCache(NewMemory(), DefaultQueuedCacheBytes)
	ks := keysN("r", 1)
	err := c.mark("c1", ks, func(campaign string, keys []Key) error {
		if err := c.Drop(campaign); err != nil { // arrives while the store is marking
			return err
		}
		return c.Store.MarkQueued(campaign, keys)
	})
	require.NoError(t, err)
	require.False(t, c.has(in(KeyOf("c1"), ks[0])), "a mark taken before Drop was remembered after it")
}

func TestQueuedCacheIsBounded(t *testing.T) {
	store := &countingSeen{Store: NewMemory()}
	c := NewQueuedCache(store, minQueuedCacheBytes)
	require.Equal(t, int64(minQueuedCacheBytes), c.Bytes(), "the smallest cache's memory")
	require.Equal(t, 96, c.Cap(), "two generations of 64 slots, three quarters of each")
	ks := keysN("e", 3*c.Cap()+1)
	for i := 0; i < len(ks); i += 10 {
		require.NoError(t, c.MarkQueued("c1", ks[i:min(i+10, len(ks))]))
	}
	require.LessOrEqual(t, c.gens.cur.n+c.gens.prev.n, c.Cap(), "keys the cache holds")
	// The newest keys are answered from the cache, the oldest from the
	// store, which still knows them.
	store.asked = 0
	got, err := c.Queued("c1", ks[len(ks)-40:])
	require.NoError(t, err)
	require.NotContains(t, got, false, "the newest keys")
	require.Zero(t, store.asked, "store lookups for the newest keys")
	got, _ = c.Queued("c1", ks[:1])
	require.True(t, got[0], "the oldest key")
	require.Equal(t, 1, store.asked, "store lookups for the oldest key")
}

// The cache's size follows its budget, a power of two of slots per
// generation that fits it.
func TestQueuedCacheSize(t *testing.T) {
	for _, tc := range []struct {
		bytes, want int64
	}{
		{0, minQueuedCacheBytes},
		{1, minQueuedCacheBytes},
		{DefaultQueuedCacheBytes, DefaultQueuedCacheBytes},
		{DefaultQueuedCacheBytes - 1, DefaultQueuedCacheBytes / 2},
		{DefaultQueuedCacheBytes + 1, DefaultQueuedCacheBytes},
		{3 << 20, 2 << 20},
		{1 << 62, 1 << 62}, // sized without overflow; only the first 1 MB is made
	} {
		require.Equal(t, tc.want, NewQueuedCache(NewMemory(), tc.bytes).Bytes(), "NewQueuedCache(%d)", tc.bytes)
	}
}

// The zero key, the table's empty-slot marker, is held like any other;
// keys that share a home slot are all found.
func TestKeyTable(t *testing.T) {
	tb := newKeyTable(64)
	defer func() { tb.free() }()
	require.False(t, tb.has(Key{}))
	tb.add(Key{})
	require.True(t, tb.has(Key{}), "the zero key")
	var same []Key
	for i := 0; len(same) < 5; i++ {
		k := KeyOf(fmt.Sprint(i))
		if tb.home(k) == 7 {
			same = append(same, k)
		}
	}
	for _, k := range same[:4] {
		tb.add(k)
	}
	for _, k := range same[:4] {
		require.True(t, tb.has(k), "a key of a shared home slot")
	}
	require.False(t, tb.has(same[4]), "a key not added, of the same home slot")
	require.Equal(t, 5, tb.n)
	tb.reset()
	require.False(t, tb.has(Key{}), "the zero key after reset")
	require.False(t, tb.has(same[0]), "a key after reset")
}

// A Drop clears every campaign's keys: the others then ask the store,
// which still knows theirs.
func TestQueuedCacheDropClearsAll(t *testing.T) {
	store := &countingSeen{Store: NewMemory()}
	c := NewQueuedCache(store, DefaultQueuedCacheBytes)
	ks := keysN("f", 2)
	require.NoError(t, c.MarkQueued("c1", ks[:1]))
	require.NoError(t, c.MarkQueued("c2", ks[1:]))
	require.NoError(t, c.Drop("c1"))
	store.asked = 0
	got, err := c.Queued("c2", ks[1:])
	require.NoError(t, err)
	require.True(t, got[0], "c2's key after c1's Drop")
	require.Equal(t, 1, store.asked, "store lookups for c2's key")
	got, _ = c.Queued("c1", ks[:1])
	require.False(t, got[0], "c1's key after its Drop")
}

// A generation starts at startSlots and doubles as it fills, keeping its
// keys, up to the cache's size.
func TestQueuedCacheGrows(t *testing.T) {
	store := &countingSeen{Store: NewMemory()}
	c := NewQueuedCache(store, DefaultQueuedCacheBytes)
	require.Len(t, c.gens.cur.slots, startSlots, "a new cache's generation")
	ks := keysN("g", 100_000) // more than three quarters of 2 x startSlots
	for i := 0; i < len(ks); i += 1000 {
		require.NoError(t, c.MarkQueued("c1", ks[i:i+1000]))
	}
	require.Len(t, c.gens.cur.slots, 4*startSlots, "the generation after 100,000 keys")
	require.Len(t, c.gens.prev.slots, 64, "the previous generation, still unused")
	store.asked = 0
	got, err := c.Queued("c1", ks)
	require.NoError(t, err)
	require.NotContains(t, got, false, "keys kept through the growth")
	require.Zero(t, store.asked, "store lookups")
	// A Drop gives the memory back: the generations start again small.
	require.NoError(t, c.Drop("c2"))
	require.Len(t, c.gens.cur.slots, startSlots, "the generation after a Drop")
	require.Zero(t, c.gens.cur.n, "keys after a Drop")
}

// Campaigns whose IDs differ in a last byte, crawling URLs that differ the
// same way, do not see each other's keys: FNV-1a keys of such pairs differ
// by one of few values, so a fold by the campaigns' FNV keys made them
// meet in the table.
func TestQueuedCacheCampaignsApart(t *testing.T) {
	store := &countingSeen{Store: NewMemory()}
	c := NewQueuedCache(store, DefaultQueuedCacheBytes)
	const n = 100_000
	mine, theirs := make([]Key, n), make([]Key, n)
	for i := range n {
		p := fmt.Sprintf("http://h%d.example/page/", i)
		mine[i], theirs[i] = KeyOf(p+"1"), KeyOf(p+"2")
	}
	for i := 0; i < n; i += 1000 {
		require.NoError(t, c.MarkQueued("c-1", mine[i:i+1000]))
	}
	got, err := c.Queued("c-2", theirs)
	require.NoError(t, err)
	var wrong int
	for _, q := range got {
		if q {
			wrong++
		}
	}
	require.Zero(t, wrong, "keys c-2 never queued said queued, from c-1's")
}

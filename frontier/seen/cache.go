package seen

import "sync"

// queuedCacheGen bounds the queued-keys cache: each campaign keeps at most
// two generations of this many keys (about 40 bytes each in a Go map, so
// at most ~5 MB per campaign).
const queuedCacheGen = 1 << 16

// QueuedCache is a Store that remembers, per campaign, keys the store
// has said or been told are queued (or done), and answers Queued for them
// without asking the store. A page's links repeat (navigation, the same
// related pages), so most of the keys a record looks up were seen a moment
// ago: on the test web the store's Queued was 14% of the scheduler's CPU,
// all of it seeks in Pebble's memtable.
//
// It only ever says "queued" for a key the store confirmed in this process
// (a Queued answer, or a MarkQueued or MarkDone that succeeded), and a
// mark never goes back to unqueued except by Drop, which clears the
// campaign here too: an exact set of recently confirmed publishes. A key it does not hold is looked up in the store as before.
// Eviction is by generation: when the current one fills, it becomes the
// previous one and the old previous one is dropped.
type QueuedCache struct {
	Store
	mu   sync.Mutex
	byID map[string]*queuedGens
}

type queuedGens struct{ cur, prev map[Key]struct{} }

// NewQueuedCache returns an empty cache in front of s. Every call goes to s
// except the Queued lookups of keys the cache holds; DiskBytes and
// Compacting are s's.
func NewQueuedCache(s Store) *QueuedCache {
	return &QueuedCache{Store: s, byID: map[string]*queuedGens{}}
}

func (c *QueuedCache) gens(campaign string) *queuedGens {
	g := c.byID[campaign]
	if g == nil {
		g = &queuedGens{cur: map[Key]struct{}{}}
		c.byID[campaign] = g
	}
	return g
}

// remember records keys as queued; c.mu is held.
func (g *queuedGens) remember(k Key) {
	if _, ok := g.cur[k]; ok {
		return
	}
	if len(g.cur) >= queuedCacheGen {
		g.prev, g.cur = g.cur, make(map[Key]struct{}, queuedCacheGen)
	}
	g.cur[k] = struct{}{}
}

func (g *queuedGens) has(k Key) bool {
	if _, ok := g.cur[k]; ok {
		return true
	}
	_, ok := g.prev[k]
	return ok
}

// Queued implements Store: the keys the cache holds are queued; the
// others are asked of the store.
func (c *QueuedCache) Queued(campaign string, keys []Key) ([]bool, error) {
	out := make([]bool, len(keys))
	var ask []Key
	var at []int
	c.mu.Lock()
	g := c.gens(campaign)
	for i, k := range keys {
		if g.has(k) {
			out[i] = true
			continue
		}
		ask, at = append(ask, k), append(at, i)
	}
	c.mu.Unlock()
	if len(ask) == 0 {
		return out, nil
	}
	got, err := c.Store.Queued(campaign, ask)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	for n, i := range at {
		if got[n] {
			out[i] = true
			g.remember(keys[i]) // g, not c.gens: see mark
		}
	}
	c.mu.Unlock()
	return out, nil
}

// MarkQueued implements Store; the keys are remembered once the store
// has them.
func (c *QueuedCache) MarkQueued(campaign string, keys []Key) error {
	return c.mark(campaign, keys, c.Store.MarkQueued)
}

// MarkDone implements Store: a done key is queued too.
func (c *QueuedCache) MarkDone(campaign string, keys []Key) error {
	return c.mark(campaign, keys, c.Store.MarkDone)
}

func (c *QueuedCache) current(campaign string) *queuedGens {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gens(campaign)
}

// mark calls store (the store's MarkQueued or MarkDone) and, once it has
// succeeded, remembers keys in g, the campaign's generations taken before
// the call: if Drop ran meanwhile, g is no longer the campaign's and the
// keys go nowhere, so the cache never outlives a Drop.
func (c *QueuedCache) mark(campaign string, keys []Key, store func(string, []Key) error) error {
	g := c.current(campaign)
	if err := store(campaign, keys); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		g.remember(k)
	}
	return nil
}

// Drop implements Store and forgets the campaign here first, so that
// nothing cached outlives the marks.
func (c *QueuedCache) Drop(campaign string) error {
	c.mu.Lock()
	delete(c.byID, campaign)
	c.mu.Unlock()
	return c.Store.Drop(campaign)
}

// DiskBytes is the wrapped store's (0 when it has no disk), so that the
// scheduler's seen_store_bytes metric sees through the cache.
func (c *QueuedCache) DiskBytes() int64 {
	if d, ok := c.Store.(interface{ DiskBytes() int64 }); ok {
		return d.DiskBytes()
	}
	return 0
}

// Compacting is the wrapped store's count of compactions running now (0
// when it does not compact).
func (c *QueuedCache) Compacting() int {
	if d, ok := c.Store.(interface{ Compacting() int }); ok {
		return d.Compacting()
	}
	return 0
}

package seen

import (
	"crypto/sha256"
	"encoding/binary"
	"runtime"
	"sync"
)

// DefaultQueuedCacheBytes is a scheduler's queued-keys cache when its
// configuration gives none: two generations of 2^20 slots of 16 bytes,
// about 1.5 M keys in all, enough for a campaign of a million URLs to
// find its known links without asking the store.
const DefaultQueuedCacheBytes = 32 << 20

// minQueuedCacheBytes is the smallest cache: two generations of 64 slots.
const minQueuedCacheBytes = 2 * 64 * 16

// QueuedCache is a Store that remembers keys the store has said or been
// told are queued (or done), and answers Queued for them without asking
// the store. A page's links repeat (navigation, the same related pages),
// so most of the keys a record looks up were seen a moment ago: on the
// test web the store's Queued was 14% of the scheduler's CPU, and at a
// million URLs the lookups that missed a smaller cache went to Pebble's
// blocks (bench/README.md, "The two webs' profiles side by side").
//
// It only ever says "queued" for a key the store confirmed in this process
// (a Queued answer, or a MarkQueued or MarkDone that succeeded), and a
// mark never goes back to unqueued except by Drop, which clears the cache
// too: an exact set of recently confirmed publishes. A key it does not
// hold is looked up in the store as before.
//
// Its memory is bounded when it is made, whatever the number of
// campaigns: every campaign's keys share two generations of an open-addressing
// table of 16-byte slots, each key folded with its campaign's own key
// (campaignMask) so that campaigns do not see each other's. A
// generation starts at 1 MB and doubles when it is three quarters full;
// once it has its full size it becomes the previous one instead, and the
// old previous one is cleared and reused. The tables live outside the Go
// heap (keyMemory), unmapped when the cache is no longer reachable.
type QueuedCache struct {
	Store
	mu   sync.Mutex
	gens *generations
	// slots is a full generation's size; a generation starts smaller
	// (startSlots) and doubles as it fills, so that a small crawl takes
	// little memory.
	slots int
	// drops counts Drop calls: a key confirmed by a store call that began
	// before a Drop is not remembered after it.
	drops uint64
}

// startSlots is a new generation's size: 1 MB.
const startSlots = 1 << 16

// generations are the cache's two tables, apart from the cache so that
// the cleanup that frees them does not keep the cache reachable.
type generations struct{ cur, prev *keyTable }

// NewQueuedCache returns an empty cache of at most bytes (but at least
// two generations of 64 slots) in front of s. Every call goes to s except
// the Queued lookups of keys the cache holds; DiskBytes and Compacting
// are s's.
func NewQueuedCache(s Store, bytes int64) *QueuedCache {
	slots := 64 // each generation's: the largest power of two that fits
	for int64(slots) <= bytes/(2*2*16) {
		slots *= 2
	}
	g := &generations{cur: newKeyTable(min(slots, startSlots)), prev: newKeyTable(64)}
	c := &QueuedCache{Store: s, gens: g, slots: slots}
	// Every use of the tables is under c.mu, whose Unlock comes after it,
	// so c is reachable while they are read: its cleanup cannot unmap
	// them under a reader.
	runtime.AddCleanup(c, func(g *generations) { g.cur.free(); g.prev.free() }, g)
	return c
}

// Bytes is the memory the cache's two generations take at most.
func (c *QueuedCache) Bytes() int64 { return int64(c.slots) * 2 * 16 }

// Cap is the number of keys the cache holds at most.
func (c *QueuedCache) Cap() int { return 2 * maxKeys(c.slots) }

// campaignMask is what a campaign's keys are folded with: the first 16
// bytes of the SHA-256 of its ID. Not its FNV-1a key: the keys of two URLs
// that differ in a last byte differ by one of few values, and so do the
// FNV keys of two IDs that differ the same way (c-1, c-2), so folded by
// those, 404 of 100,000 such URLs of one campaign met the other's in the
// table (TestQueuedCacheCampaignsApart), each a URL lost. A mask from a
// cryptographic hash differs from another by a value unrelated to the
// keys.
func campaignMask(campaign string) Key {
	sum := sha256.Sum256([]byte(campaign))
	return Key(sum[:16])
}

// in folds campaign (its campaignMask) into k: a bijection for each
// campaign, so that its own keys never meet each other.
func in(campaign Key, k Key) Key {
	for i := range k {
		k[i] ^= campaign[i]
	}
	return k
}

// remember records k as queued; c.mu is held. A full current generation
// doubles until it has c.slots; then it becomes the previous one, and the
// old previous one is emptied and reused (or, smaller, replaced).
func (c *QueuedCache) remember(k Key) {
	g := c.gens
	if g.cur.has(k) {
		return
	}
	switch {
	case g.cur.n < g.cur.max:
	case len(g.cur.slots) < c.slots:
		g.cur = g.cur.grown()
	case len(g.prev.slots) == c.slots:
		g.prev.reset()
		g.prev, g.cur = g.cur, g.prev
	default:
		g.prev.free()
		g.prev, g.cur = g.cur, newKeyTable(c.slots)
	}
	g.cur.add(k)
}

func (c *QueuedCache) has(k Key) bool { return c.gens.cur.has(k) || c.gens.prev.has(k) }

// Queued implements Store: the keys the cache holds are queued; the
// others are asked of the store.
func (c *QueuedCache) Queued(campaign string, keys []Key) ([]bool, error) {
	ck := campaignMask(campaign)
	out := make([]bool, len(keys))
	var ask []Key
	var at []int
	c.mu.Lock()
	drops := c.drops
	for i, k := range keys {
		if c.has(in(ck, k)) {
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
	defer c.mu.Unlock()
	for n, i := range at {
		if got[n] {
			out[i] = true
			if c.drops == drops {
				c.remember(in(ck, keys[i]))
			}
		}
	}
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

// mark calls store (the store's MarkQueued or MarkDone) and, once it has
// succeeded, remembers keys, unless a Drop ran meanwhile: the cache never
// outlives a Drop.
func (c *QueuedCache) mark(campaign string, keys []Key, store func(string, []Key) error) error {
	c.mu.Lock()
	drops := c.drops
	c.mu.Unlock()
	if err := store(campaign, keys); err != nil {
		return err
	}
	ck := campaignMask(campaign)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.drops != drops {
		return nil
	}
	for _, k := range keys {
		c.remember(in(ck, k))
	}
	return nil
}

// Drop implements Store. It clears the whole cache, every campaign's keys
// with the dropped one's (they cannot be told apart): that costs the
// others store lookups, never a wrong answer. It clears it before the
// store's Drop and again after, so that a lookup answered by the store
// between the two is not remembered past it; the tables go back to their
// first sizes, and their memory to the OS.
func (c *QueuedCache) Drop(campaign string) error {
	c.forget()
	err := c.Store.Drop(campaign)
	c.forget()
	return err
}

func (c *QueuedCache) forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.drops++
	g := c.gens
	g.cur.free()
	g.prev.free()
	g.cur, g.prev = newKeyTable(min(c.slots, startSlots)), newKeyTable(64)
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

// keyTable is an exact set of Keys in a fixed open-addressing table with
// linear probing: a power of two of 16-byte slots, the zero Key marking
// an empty one (the zero Key itself is held apart), filled to at most
// three quarters. A Go map of the same keys took about 40 bytes a key,
// in the heap; this takes 16 / 0.75, outside it.
type keyTable struct {
	slots   []Key
	shift   uint // 64 - log2(len(slots))
	n       int  // keys held, zero included
	max     int  // maxKeys(len(slots))
	zero    bool
	release func()
}

func maxKeys(slots int) int { return slots / 4 * 3 }

// newKeyTable returns an empty table of slots slots (a power of two).
func newKeyTable(slots int) *keyTable {
	keys, release := keyMemory(slots)
	t := &keyTable{slots: keys, max: maxKeys(slots), shift: 64, release: release}
	for s := slots; s > 1; s >>= 1 {
		t.shift--
	}
	return t
}

// grown returns a table twice as large holding t's keys, and frees t.
func (t *keyTable) grown() *keyTable {
	g := newKeyTable(2 * len(t.slots))
	for _, k := range t.slots {
		if k != (Key{}) {
			g.add(k)
		}
	}
	if t.zero {
		g.add(Key{})
	}
	t.free()
	return g
}

// free gives the table's memory back; nothing may use it after.
func (t *keyTable) free() {
	t.slots = nil
	t.release()
}

// home is k's first slot: the top bits of a multiplicative hash of both
// halves (the keys are FNV-1a hashes, whose low bits mix least).
func (t *keyTable) home(k Key) int {
	h := binary.LittleEndian.Uint64(k[:8])*0x9E3779B97F4A7C15 ^ binary.LittleEndian.Uint64(k[8:])
	return int((h * 0xBF58476D1CE4E5B9) >> t.shift)
}

func (t *keyTable) has(k Key) bool {
	if k == (Key{}) {
		return t.zero
	}
	mask := len(t.slots) - 1
	for i := t.home(k); ; i = (i + 1) & mask {
		switch t.slots[i] {
		case k:
			return true
		case Key{}:
			return false
		}
	}
}

// add inserts k, which the table does not hold; the caller keeps n below
// max, so an empty slot is always found.
func (t *keyTable) add(k Key) {
	t.n++
	if k == (Key{}) {
		t.zero = true
		return
	}
	mask := len(t.slots) - 1
	i := t.home(k)
	for t.slots[i] != (Key{}) {
		i = (i + 1) & mask
	}
	t.slots[i] = k
}

func (t *keyTable) reset() {
	clear(t.slots)
	t.n, t.zero = 0, false
}

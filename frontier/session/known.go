package session

import (
	"hash/maphash"
	"sync"

	"github.com/drover-crawl/drover/urlrule"
)

// KnownLinks is a fetcher process's memory of the links its campaign's
// schedulers have recorded: published to the frontier (confirmed) and
// marked queued, or settled as disallowed. A session given one (Client.Known)
// leaves those links out of its outcomes, so that neither the fetcher
// encodes nor the scheduler decodes, hashes and looks up a link it has
// already settled: most of a page's links are (a site's navigation, its
// neighbours), and on the bench's test web 39 of every 40 links a page
// reports were queued before. It is the cache of popular URLs that
// Mercator put in front of its URL-seen test.
//
// A link becomes known only when a scheduler says that the outcome which
// carried it was recorded (FrameRecorded): a link left out because it was
// merely reported before would be lost if that report's record failed and
// its page, fetched again, left it out too. What the cache forgets is only
// reported again: it holds at most two generations of perGen links, the
// older dropped when the newer fills (an LRU's approximation, with no list
// to keep).
//
// Safe for concurrent use: the sessions of a campaign in one process share
// one.
type KnownLinks struct {
	perGen int
	seeds  [2]maphash.Seed

	mu       sync.Mutex
	cur, old map[linkKey]struct{}
}

// linkKey is 128 bits of a link's URL, as collision-proof as the
// scheduler's seen store (seen.KeyOf).
type linkKey [2]uint64

// DefaultKnownLinks is the generation size NewKnownLinks(0) takes: up to
// 2 x 128 K links, about 14 MB when full.
const DefaultKnownLinks = 128 << 10

// NewKnownLinks returns an empty cache of up to 2 x perGen links
// (perGen <= 0 takes DefaultKnownLinks).
func NewKnownLinks(perGen int) *KnownLinks {
	if perGen <= 0 {
		perGen = DefaultKnownLinks
	}
	return &KnownLinks{
		perGen: perGen,
		seeds:  [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		cur:    map[linkKey]struct{}{},
		old:    map[linkKey]struct{}{},
	}
}

func (k *KnownLinks) key(url string) linkKey {
	return linkKey{maphash.String(k.seeds[0], url), maphash.String(k.seeds[1], url)}
}

// Len is how many links the cache holds now.
func (k *KnownLinks) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.cur) + len(k.old)
}

// filter returns the links not known, their keys, and how many were left
// out. links itself is not changed: kept is a new slice when any was left
// out.
func (k *KnownLinks) filter(links []urlrule.Link) (kept []urlrule.Link, keys []linkKey, dropped int) {
	kept = links
	k.mu.Lock()
	defer k.mu.Unlock()
	for i, l := range links {
		key := k.key(l.URL)
		if k.has(key) {
			if dropped == 0 {
				kept = append(make([]urlrule.Link, 0, len(links)-1), links[:i]...)
			}
			dropped++
			continue
		}
		if dropped > 0 {
			kept = append(kept, l)
		}
		keys = append(keys, key)
	}
	k.roll()
	return kept, keys, dropped
}

// has reports whether key is known; a key of the older generation that is
// used again moves into the current one.
func (k *KnownLinks) has(key linkKey) bool {
	if _, ok := k.cur[key]; ok {
		return true
	}
	if _, ok := k.old[key]; ok {
		k.cur[key] = struct{}{}
		return true
	}
	return false
}

// add records keys as known.
func (k *KnownLinks) add(keys []linkKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, key := range keys {
		k.cur[key] = struct{}{}
	}
	k.roll()
}

// roll starts a new generation when the current one is full.
func (k *KnownLinks) roll() {
	if len(k.cur) >= k.perGen {
		k.old, k.cur = k.cur, map[linkKey]struct{}{}
	}
}

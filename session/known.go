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

	mu   sync.Mutex
	sets map[string]*knownSet // by scheduler (Welcome.Scheduler)
}

// knownSet is what one scheduler's campaign, in one incarnation, recorded.
// Links are known per scheduler: a worker leaves out of its outcomes to a
// scheduler only what that scheduler itself recorded, and so would skip
// itself; another scheduler's view (seen marks a failed delete left
// behind, a robots.txt it read a day ago) never drops a link here. The
// incarnation (Welcome.Incarnation) is the scheduler's campaign actor:
// a campaign closed and opened again there (deleted and started anew
// under its ID, or the scheduler restarted) starts from nothing, so a
// session of an earlier run that outlived it cannot leave out the links
// the new run has not queued.
type knownSet struct {
	incarnation uint64
	cur, old    map[linkKey]struct{}
}

// knownScope names a knownSet.
type knownScope struct {
	scheduler   string
	incarnation uint64
}

// linkKey is 128 bits of a link's URL, as collision-proof as the
// scheduler's seen store (seen.KeyOf).
type linkKey [2]uint64

// DefaultKnownLinks is the generation size NewKnownLinks(0) takes: up to
// 2 x 128 K links a scheduler, about 14 MB when full.
const DefaultKnownLinks = 128 << 10

// NewKnownLinks returns an empty cache of up to 2 x perGen links per
// scheduler (perGen <= 0 takes DefaultKnownLinks).
func NewKnownLinks(perGen int) *KnownLinks {
	if perGen <= 0 {
		perGen = DefaultKnownLinks
	}
	return &KnownLinks{
		perGen: perGen,
		seeds:  [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		sets:   map[string]*knownSet{},
	}
}

func (k *KnownLinks) key(url string) linkKey {
	return linkKey{maphash.String(k.seeds[0], url), maphash.String(k.seeds[1], url)}
}

// Len is how many links the cache holds now, over every scheduler.
func (k *KnownLinks) Len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, set := range k.sets {
		n += len(set.cur) + len(set.old)
	}
	return n
}

// set returns sc's set: a scheduler's set of another incarnation is
// dropped for a new one (with create; without, nil).
func (k *KnownLinks) set(sc knownScope, create bool) *knownSet {
	set := k.sets[sc.scheduler]
	if set != nil && set.incarnation == sc.incarnation {
		return set
	}
	if !create {
		return nil
	}
	set = &knownSet{incarnation: sc.incarnation, cur: map[linkKey]struct{}{}, old: map[linkKey]struct{}{}}
	k.sets[sc.scheduler] = set
	return set
}

// filter returns the links sc does not know, their keys, and how many
// were left out. links itself is not changed: kept is a new slice when
// any was left out.
func (k *KnownLinks) filter(sc knownScope, links []urlrule.Link) (kept []urlrule.Link, keys []linkKey, dropped int) {
	all := make([]linkKey, len(links))
	for i, l := range links {
		all[i] = k.key(l.URL)
	}
	kept, keys = links, all[:0]
	k.mu.Lock()
	defer k.mu.Unlock()
	set := k.set(sc, true)
	for i, key := range all {
		// A sitemap's lastmod is news of a known URL: it is sent.
		if set.has(key) && links[i].LastMod.IsZero() {
			if dropped == 0 {
				kept = append(make([]urlrule.Link, 0, len(links)-1), links[:i]...)
			}
			dropped++
			continue
		}
		if dropped > 0 {
			kept = append(kept, links[i])
		}
		keys = append(keys, key)
	}
	set.roll(k.perGen)
	return kept, keys, dropped
}

// add records keys as known to sc; nothing when sc's scheduler has moved
// on to another incarnation.
func (k *KnownLinks) add(sc knownScope, keys []linkKey) {
	k.mu.Lock()
	defer k.mu.Unlock()
	set := k.set(sc, false)
	if set == nil {
		return
	}
	for _, key := range keys {
		set.cur[key] = struct{}{}
	}
	set.roll(k.perGen)
}

// has reports whether key is known; a key of the older generation that is
// used again moves into the current one.
func (s *knownSet) has(key linkKey) bool {
	if _, ok := s.cur[key]; ok {
		return true
	}
	if _, ok := s.old[key]; ok {
		delete(s.old, key)
		s.cur[key] = struct{}{}
		return true
	}
	return false
}

// roll starts a new generation when the current one is full.
func (s *knownSet) roll(perGen int) {
	if len(s.cur) >= perGen {
		s.old, s.cur = s.cur, map[linkKey]struct{}{}
	}
}

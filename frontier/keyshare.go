package frontier

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// keyPlaces are the requests in flight under each politeness key, counted
// over every campaign of the scheduler: two campaigns crawling one host at
// a per-host concurrency of 1 have one request at a time there between
// them, as they share its delay (clocks.go). A campaign may start a
// request under a key while the key's leases out, of any campaign, are
// fewer than its own concurrency for the host.
//
// A campaign that finds the key full waits in line. When a lease under
// the key ends and a campaign other than its own waits, the place is held
// for the first such in line (which is woken to take it) rather than left
// to whichever asks first: the campaign whose lease ended would otherwise
// take it again at once, on its own loop, and starve the others. A held
// place not taken within placeHold (its campaign has no fetcher credit,
// or stopped) is given up. The holder takes its place whatever its own
// concurrency says, so campaigns with different concurrencies on one key
// have at most the largest of them at once.
//
// The places live in the scheduler's memory and are counted per
// scheduler: an IP key whose clock another scheduler owns shares its
// delay with that scheduler's campaigns, its concurrency only with this
// one's.
type keyPlaces struct {
	seed   maphash.Seed
	shards [clockShards]placeShard
}

type placeShard struct {
	mu   sync.Mutex
	keys map[string]*keyUse
}

type keyUse struct {
	out  int                  // leases out under the key, every campaign's
	line []placeWaiter        // campaigns waiting for a place, first come first
	held map[string]time.Time // campaign -> when the place freed for it is given up
}

// placeWaiter is a campaign in line for a key, and how to wake it: wake
// must not block (it posts to the campaign's actor).
type placeWaiter struct {
	campaign string
	wake     func()
}

// placeHold is how long a freed place waits for the campaign it is held
// for.
const placeHold = 250 * time.Millisecond

func newKeyPlaces() *keyPlaces {
	p := &keyPlaces{seed: maphash.MakeSeed()}
	for i := range p.shards {
		p.shards[i].keys = map[string]*keyUse{}
	}
	return p
}

func (p *keyPlaces) shard(key string) *placeShard {
	return &p.shards[maphash.String(p.seed, key)%clockShards]
}

// full reports whether campaign must wait before it starts a request
// under key at a concurrency of conc: the key's leases out reach conc, or
// its free place is held for another campaign.
func (p *keyPlaces) full(key, campaign string, conc int, now time.Time) bool {
	sh := p.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	u := sh.keys[key]
	if u == nil {
		return false
	}
	u.giveUpHeld(now)
	if _, ok := u.held[campaign]; ok {
		return false
	}
	return u.out+len(u.held) >= max(conc, 1)
}

// wait puts campaign in line for key; wake is called once a place is
// held for it. A campaign already in line keeps its place there.
func (p *keyPlaces) wait(key, campaign string, wake func()) {
	sh := p.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	u := sh.use(key)
	if _, ok := u.held[campaign]; ok || u.inLine(campaign) {
		return
	}
	u.line = append(u.line, placeWaiter{campaign, wake})
}

// use returns key's entry, made when it has none. sh.mu held.
func (sh *placeShard) use(key string) *keyUse {
	u := sh.keys[key]
	if u == nil {
		u = &keyUse{}
		sh.keys[key] = u
	}
	return u
}

func (u *keyUse) inLine(campaign string) bool {
	return slices.ContainsFunc(u.line, func(w placeWaiter) bool { return w.campaign == campaign })
}

// take counts a lease of campaign under key; a place held for campaign is
// taken by it.
func (p *keyPlaces) take(key, campaign string) {
	sh := p.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	u := sh.use(key)
	delete(u.held, campaign)
	u.out++
}

// release counts a lease of campaign under key off. When another campaign
// is first in line, the freed place is held for it and it is woken.
func (p *keyPlaces) release(key, campaign string, now time.Time) {
	sh := p.shard(key)
	sh.mu.Lock()
	u := sh.keys[key]
	if u == nil {
		sh.mu.Unlock()
		return
	}
	u.out = max(u.out-1, 0)
	u.giveUpHeld(now)
	// The place goes to the first in line other than campaign, which
	// places its own hosts as its lease ends.
	var wake func()
	if i := slices.IndexFunc(u.line, func(w placeWaiter) bool { return w.campaign != campaign }); i >= 0 {
		w := u.line[i]
		u.line = slices.Delete(u.line, i, i+1)
		if u.held == nil {
			u.held = map[string]time.Time{}
		}
		u.held[w.campaign], wake = now.Add(placeHold), w.wake
	}
	if u.out == 0 && len(u.held) == 0 && len(u.line) == 0 {
		delete(sh.keys, key)
	}
	sh.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// leave takes campaign out of key's line (its hosts of the key no longer
// wait) and gives up a place held for it.
func (p *keyPlaces) leave(key, campaign string) {
	sh := p.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	u := sh.keys[key]
	if u == nil {
		return
	}
	u.line = slices.DeleteFunc(u.line, func(w placeWaiter) bool { return w.campaign == campaign })
	delete(u.held, campaign)
	if u.out == 0 && len(u.held) == 0 && len(u.line) == 0 {
		delete(sh.keys, key)
	}
}

// giveUpHeld gives up the held places not taken in time.
func (u *keyUse) giveUpHeld(now time.Time) {
	for c, until := range u.held {
		if now.After(until) {
			delete(u.held, c)
		}
	}
}

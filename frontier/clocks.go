package frontier

import (
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// hostClocks are the politeness clocks every campaign of a scheduler
// shares: two campaigns crawling one host together keep the host's delay
// between any two of their requests, not each its own, and take turns.
//
// A campaign about to lease a URL of a host (or its robots.txt) asks the
// host's clock for a slot: the next start at least its delay after the
// last one given, to any campaign. A slot in the future is reserved for
// the campaign, which comes back for it (its host waits until then), so
// that campaigns waiting on one host are served in turn rather than by
// whichever wakes first. A reservation never taken (its campaign stopped,
// or its URLs of the host went away) costs the host one slot, and is
// dropped once it is stale (staleAfter).
//
// A host's URLs of every campaign go to one scheduler when the campaigns'
// shards are owned alike (a shard is a hash of the host); a campaign whose
// shard another scheduler owns keeps its own pace there.
type hostClocks struct {
	seed   maphash.Seed
	shards [clockShards]clockShard
}

const clockShards = 64

type clockShard struct {
	mu     sync.Mutex
	clocks map[string]*hostClock
	calls  int
}

type hostClock struct {
	last time.Time            // the latest start given
	res  map[string]time.Time // campaign -> its reserved start
}

// clockIdle: a clock whose last start is this old and that holds no
// reservation is dropped (its host is idle), so that the clocks do not
// grow with every host a scheduler ever saw.
const clockIdle = 10 * time.Minute

func newHostClocks() *hostClocks {
	c := &hostClocks{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].clocks = map[string]*hostClock{}
	}
	return c
}

// shard is the shard of host's clock.
func (c *hostClocks) shard(host string) *clockShard {
	return &c.shards[maphash.String(c.seed, host)%clockShards]
}

// slot returns when campaign may start its next request to host, delay
// after the last start any campaign was given: now (the start is taken),
// or a later time reserved for it.
func (c *hostClocks) slot(host, campaign string, delay time.Duration, now time.Time) time.Time {
	sh := c.shard(host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.calls++; sh.calls%4096 == 0 {
		sh.sweep(now)
	}
	hc := sh.clocks[host]
	if hc == nil {
		hc = &hostClock{}
		sh.clocks[host] = hc
	}
	hc.dropStale(now, delay)
	if at, ok := hc.res[campaign]; ok {
		if at.After(now) {
			return at
		}
		delete(hc.res, campaign)
		return now // its turn: last is at already
	}
	at := hc.last.Add(delay)
	if !at.After(now) {
		hc.last = now
		return now
	}
	if hc.res == nil {
		hc.res = map[string]time.Time{}
	}
	hc.res[campaign], hc.last = at, at
	return at
}

// started moves host's clock to a request start an outcome reported, which
// comes after its lease by the lease's transit to the fetcher: the next
// slots, those reserved included, are each a delay after it and after
// one another.
func (c *hostClocks) started(host string, start time.Time, delay time.Duration, now time.Time) {
	sh := c.shard(host)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	hc := sh.clocks[host]
	if hc == nil {
		return
	}
	hc.dropStale(now, delay)
	type res struct {
		campaign string
		at       time.Time
	}
	// Only the reservations still ahead move: one whose time has passed
	// and whose campaign has not come for it is left to go stale.
	var rs []res
	for c, at := range hc.res {
		if at.After(now) {
			rs = append(rs, res{c, at})
		}
	}
	slices.SortFunc(rs, func(a, b res) int { return a.at.Compare(b.at) })
	last := maxTime(hc.last, start)
	if len(rs) > 0 {
		last = start
	}
	for _, r := range rs {
		at := maxTime(r.at, last.Add(delay))
		hc.res[r.campaign], last = at, at
	}
	hc.last = maxTime(hc.last, last)
}

// staleAfter: a reservation its campaign has not come for this long past
// its time is dropped (the campaign stopped, or its URLs of the host went
// away), so that it no longer holds a slot ahead of the others'.
func staleAfter(delay time.Duration) time.Duration { return max(2*delay, time.Second) }

func (hc *hostClock) dropStale(now time.Time, delay time.Duration) {
	for c, at := range hc.res {
		if now.Sub(at) > staleAfter(delay) {
			delete(hc.res, c)
		}
	}
}

func (sh *clockShard) sweep(now time.Time) {
	for h, hc := range sh.clocks {
		hc.dropStale(now, clockIdle)
		if len(hc.res) == 0 && now.Sub(hc.last) > clockIdle {
			delete(sh.clocks, h)
		}
	}
}

// takeSlot asks the shared clock of h for a start now; when another
// campaign's request comes first, h waits for the slot reserved for this
// campaign. A host without delay shares nothing. Actor goroutine only.
func (a *campaignActor) takeSlot(h *host, now time.Time) bool {
	if h.spacing() <= 0 || a.srv.clocks == nil {
		return true
	}
	at := a.srv.clocks.slot(h.name, a.key, h.spacing(), now)
	if at.After(now) {
		a.clockWaits.Add(1)
		h.next = maxTime(h.next, at)
		return false
	}
	return true
}

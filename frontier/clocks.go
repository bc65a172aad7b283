package frontier

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"time"
)

// hostClocks are the politeness clocks every campaign of a scheduler
// shares: two campaigns crawling one host together keep the host's delay
// between any two of their requests, not each its own, and take turns.
// A clock's key is a host's politeness key (campaign.Config.ClockKey):
// its host name, registered domain or group, as its campaign chose; the
// hosts of a domain or a group then share one clock too.
//
// A campaign about to lease a URL of a host (or its robots.txt) asks the
// key's clock for a slot: the next start at least its delay after the
// last one given, to any campaign. A slot in the future is reserved for
// the campaign, which comes back for it (its host waits until then), so
// that campaigns waiting on one key are served in turn rather than by
// whichever wakes first. A campaign that comes back late (its host waited
// for a session's credit) starts then if the delay since the last start
// allows, and otherwise keeps its turn, moved to the first start the
// delay allows, the reservations behind it moving too. A reservation
// never taken (its campaign stopped, or its URLs of the host went away)
// costs the key one slot, and is dropped once it is stale (staleAfter).
//
// A clock a scheduler creates counts a start at its creation: the first
// request to a key waits one delay, whatever happened to the key before
// (a scheduler SIGKILLed, a failover) keeps its spacing.
//
// A key's URLs of every campaign go to one scheduler when the campaigns'
// shards are owned alike (a shard is a hash of the key); a campaign whose
// shard another scheduler owns keeps its own pace there. An IP key is the
// exception: its hosts' shards are their host names', and one scheduler
// owns its clock for all the others (peers.go, ipkey.go).
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
	took time.Time            // the latest start taken, or reported by an outcome
	last time.Time            // the latest start taken or reserved
	res  map[string]time.Time // campaign -> its reserved start
	// delay is the longest delay asked of the clock: it is kept that long
	// past its last start besides clockIdle, so that a host paced slower
	// than clockIdle (a long Crawl-delay) keeps its clock between two
	// requests instead of paying a new clock's delay each time.
	delay time.Duration
}

// clockIdle: a clock whose last start is this old (past its delay) and
// that holds no reservation is dropped (its host is idle), so that the
// clocks do not grow with every host a scheduler ever saw.
const clockIdle = 10 * time.Minute

func newHostClocks() *hostClocks {
	c := &hostClocks{seed: maphash.MakeSeed()}
	for i := range c.shards {
		c.shards[i].clocks = map[string]*hostClock{}
	}
	return c
}

// shard is the shard of key's clock.
func (c *hostClocks) shard(key string) *clockShard {
	return &c.shards[maphash.String(c.seed, key)%clockShards]
}

// slot returns when campaign may start its next request under key, delay
// after the last start any campaign was given: now (the start is taken),
// or a later time reserved for it.
func (c *hostClocks) slot(key, campaign string, delay time.Duration, now time.Time) time.Time {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.calls++; sh.calls%4096 == 0 {
		sh.sweep(now)
	}
	hc := sh.clocks[key]
	if hc == nil {
		// The key's last start is not known here: this scheduler just
		// (re)started, or took the key's shards over from one that died
		// (or, for an IP key, from an owner that went or came back), or
		// the clock was idle and dropped. Count one now, so that the
		// first start here is a delay after any the key had before.
		hc = &hostClock{took: now, last: now}
		sh.clocks[key] = hc
	}
	hc.delay = max(hc.delay, delay)
	hc.dropStale(now, delay)
	earliest := hc.took.Add(delay)
	if at, ok := hc.res[campaign]; ok {
		if at.After(now) {
			return at
		}
		if !now.Before(earliest) {
			hc.unreserve(campaign)
			hc.take(now, delay, now)
			return now
		}
		// Late, and another campaign started since: its turn is the
		// next start the delay allows, ahead of the turns reserved
		// after its own.
		hc.res[campaign] = earliest
		hc.respace(hc.took, delay, now, campaign)
		return hc.res[campaign]
	}
	at := maxTime(hc.last.Add(delay), earliest)
	if !at.After(now) {
		hc.take(now, delay, now)
		return now
	}
	if hc.res == nil {
		hc.res = map[string]time.Time{}
	}
	hc.res[campaign], hc.last = at, at
	return at
}

// take records a start at start: the reservations still ahead each go a
// delay after it and after one another.
func (hc *hostClock) take(start time.Time, delay time.Duration, now time.Time) {
	hc.took = maxTime(hc.took, start)
	hc.last = maxTime(hc.last, hc.took)
	hc.respace(hc.took, delay, now, "")
}

// respace moves the reservations still ahead of now so that they keep
// their order and each starts at least delay after from and after the one
// before it; first goes ahead of a reservation at the same time.
func (hc *hostClock) respace(from time.Time, delay time.Duration, now time.Time, first string) {
	type res struct {
		campaign string
		at       time.Time
	}
	// Only the reservations still ahead move: one whose time has passed
	// and whose campaign has not come for it is moved when it comes, or
	// left to go stale.
	var rs []res
	for c, at := range hc.res {
		if at.After(now) {
			rs = append(rs, res{c, at})
		}
	}
	slices.SortFunc(rs, func(a, b res) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.campaign == first:
			return -1
		case b.campaign == first:
			return 1
		}
		return strings.Compare(a.campaign, b.campaign)
	})
	last := from
	for _, r := range rs {
		at := maxTime(r.at, last.Add(delay))
		hc.res[r.campaign], last = at, at
	}
	hc.last = maxTime(hc.last, last)
}

// started moves key's clock to a request start an outcome reported, which
// comes after its lease by the lease's transit to the fetcher: the next
// slots, those reserved included, are each a delay after it and after
// one another.
func (c *hostClocks) started(key string, start time.Time, delay time.Duration, now time.Time) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	hc := sh.clocks[key]
	if hc == nil {
		return
	}
	hc.dropStale(now, delay)
	hc.take(start, delay, now)
}

// staleAfter: a reservation its campaign has not come for this long past
// its time is dropped (the campaign stopped, or its URLs of the host went
// away), so that it no longer holds a slot ahead of the others'.
func staleAfter(delay time.Duration) time.Duration { return max(2*delay, time.Second) }

func (hc *hostClock) dropStale(now time.Time, delay time.Duration) {
	for c, at := range hc.res {
		if now.Sub(at) > staleAfter(delay) {
			hc.unreserve(c)
		}
	}
}

// unreserve drops campaign's reservation; the last one dropped takes the
// map with it, since a map keeps its memory after its entries went, and
// a clock is kept per active host (at 100,000 hosts, the empty maps were
// about 42 MB of the heap left after the crawl).
func (hc *hostClock) unreserve(campaign string) {
	delete(hc.res, campaign)
	if len(hc.res) == 0 {
		hc.res = nil
	}
}

func (sh *clockShard) sweep(now time.Time) {
	for h, hc := range sh.clocks {
		hc.dropStale(now, clockIdle)
		if len(hc.res) == 0 && now.Sub(hc.last) > clockIdle+hc.delay {
			delete(sh.clocks, h)
		}
	}
}

// takeSlot asks the shared clock of h for a start now; when another
// campaign's request comes first, h waits for the slot reserved for this
// campaign. The clock spaces starts by the delay; the adaptive delay
// (delay_factor) is the campaign's own, kept by h.next. A host without
// delay shares nothing. A clock another scheduler owns is asked without
// waiting (takeRemoteSlot). Actor goroutine only.
func (a *campaignActor) takeSlot(h *host, now time.Time) bool {
	if h.delay <= 0 || a.srv.clocks == nil {
		return true
	}
	if owner := a.srv.peers.ownerOf(h.clock); owner != nil {
		return a.ipKeys().takeRemoteSlot(h, owner, now)
	}
	at := a.srv.clocks.slot(h.clock, a.key, h.delay, now)
	if at.After(now) {
		a.clockWaits.Add(1)
		h.next = maxTime(h.next, at)
		return false
	}
	return true
}

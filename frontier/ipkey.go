package frontier

import (
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
)

// A campaign keyed by IP (campaign.KeyIP) holds a host by its host name,
// as every campaign does, and keys its clock by the address a fetcher
// reported for it: first the host is resolved (a resolve lease, no
// request to the host), then its robots.txt and pages ask the IP's clock,
// which one scheduler owns (peers.go). A host whose IP changes (DNS round
// robin, a move) follows the IP of its last report.

type ipState uint8

const (
	ipUnknown   ipState = iota // no address reported yet: the next lease resolves it
	ipResolving                // a resolve lease is out
	ipSettled                  // the clock is the IP's, or the host's own (not resolved)
)

// remoteSlot is h's part in a start asked of the scheduler that owns its
// clock.
type remoteSlot struct {
	// asking: h waits for the answer to its key's ask (keyAsk), until
	// askBy at most; then the ask counts as lost and is made again.
	asking bool
	askBy  time.Time
	// grant: the owner took a start for h; h may start until then, or
	// asks again.
	grant time.Time
}

// keyAsk is the one ask in flight for a key of the campaign: the hosts of
// the key that come meanwhile wait for its answer rather than ask again.
// A start taken now goes to the host that asked; the others ask again
// (the owner then reserves the campaign's next turn); a turn later is
// every host's to wait for.
type keyAsk struct {
	seq   uint64
	by    time.Time
	asker *host
	hosts []*host
}

// askWait: an ask unanswered for this long is made again (the link
// answers every ask within peerTimeout, with an error if need be).
const askWait = peerTimeout + time.Second

// grantFor is how long a start the owner took now stays the host's: the
// owner gives the next start a delay later, so a start used later comes
// closer to it.
func grantFor(delay time.Duration) time.Duration {
	return min(max(delay/4, 10*time.Millisecond), time.Second)
}

// ipKeys is the campaign's actor seen from keying its clocks by IP: it
// resolves hosts and moves them to their IP's clock (needsResolve,
// learnIP, onResolved), asks the clock's owner for starts (takeRemoteSlot,
// onSlot) and tells it the starts taken (reportStart). Actor goroutine
// only: an owner's answer comes to the actor as a post (onSlot).
type ipKeys struct{ *campaignActor }

// ipKeys returns a's ipKeys.
func (a *campaignActor) ipKeys() ipKeys { return ipKeys{a} }

// byIP reports whether the campaign keys its clocks by IP.
func (a ipKeys) byIP() bool { return a.cfg.PolitenessKey == campaign.KeyIP }

// needsResolve reports whether h's next lease must resolve it (to s). A
// session that cannot (an older fetcher) leaves the host on its own
// clock until a request of it reports its IP.
func (a ipKeys) needsResolve(h *host, s *fetcherSession) bool {
	if !a.byIP() || h.ip != ipUnknown {
		return false
	}
	if !s.resolves {
		h.ip = ipSettled
		return false
	}
	return true
}

// learnIP moves h to the clock of ip, the address a fetcher reported for
// it. A start asked of another clock is forgotten.
func (a ipKeys) learnIP(h *host, ip string) {
	if !a.byIP() || ip == "" {
		return
	}
	h.ip = ipSettled
	if key := campaign.IPKey(ip); h.clock != key {
		h.clock = key
		h.remote = remoteSlot{}
	}
}

// onResolved applies a resolve lease's outcome: the host's clock is its
// IP's; without an IP (it did not resolve) it stays the host's own, and
// its robots.txt lease fails the way a page's would.
func (a ipKeys) onResolved(h *host, o session.Outcome, now time.Time) {
	if o.Released {
		h.ip = ipUnknown
	} else {
		h.ip = ipSettled
		a.learnIP(h, o.IP)
	}
	a.leaser().place(h, now)
}

// takeRemoteSlot asks owner, the scheduler that owns h's clock, for a
// start, without waiting: h waits until the answer, which onSlot applies.
// A start the owner took for h is used once, if still fresh.
func (a ipKeys) takeRemoteSlot(h *host, owner slotAsker, now time.Time) bool {
	r := &h.remote
	if !r.grant.IsZero() {
		g := r.grant
		r.grant = time.Time{}
		if !now.After(g) {
			return true
		}
	}
	if r.asking && now.Before(r.askBy) {
		return false
	}
	if ka := a.keyAsks[h.clock]; ka != nil && now.Before(ka.by) {
		ka.hosts = append(ka.hosts, h)
		r.asking, r.askBy = true, ka.by
		return false
	}
	a.askSeq++
	ka := &keyAsk{seq: a.askSeq, by: now.Add(askWait), asker: h, hosts: []*host{h}}
	a.keyAsks[h.clock] = ka
	r.asking, r.askBy = true, ka.by
	key, seq := h.clock, ka.seq
	a.remoteAsks.Add(1)
	owner.ask(session.SlotAsk{Key: key, From: askID(a.srv.peers.self, a.key), Delay: h.delay}, func(ans slotAnswer) {
		// Not on the link's goroutine: a busy actor must not hold up
		// the other campaigns' answers.
		go a.post(func() { a.onSlot(key, seq, ans) })
	})
	return false
}

// onSlot applies the owner's answer to the ask seq of key: a start now
// (its asker may lease at once), a turn later (the key's hosts wait for
// it, then ask again), or a failure (the owner is passed over for a
// while: the hosts ask the next one).
func (a ipKeys) onSlot(key string, seq uint64, ans slotAnswer) {
	ka := a.keyAsks[key]
	if ka == nil || ka.seq != seq {
		return // lost, and asked again since
	}
	delete(a.keyAsks, key)
	now := time.Now()
	switch {
	case ans.err != nil:
		a.log.Debug("a start asked of another scheduler failed; asking the next owner", "key", key, "err", ans.err)
	case ans.wait > 0:
		a.clockWaits.Add(1)
	}
	for _, h := range ka.hosts {
		if h.clock != key || !h.remote.asking {
			continue // moved to another IP meanwhile
		}
		h.remote.asking = false
		switch {
		case ans.err != nil:
		case ans.wait <= 0:
			if h == ka.asker {
				h.remote.grant = now.Add(grantFor(h.delay))
			}
		default:
			h.next = maxTime(h.next, now.Add(ans.wait))
		}
		a.leaser().place(h, now)
	}
}

// reportStart moves h's clock to a request start its outcome reported:
// the owner's, told without waiting, and this scheduler's own clock of
// the key when it has one (it owns the key, or kept the key's clock
// while the owner was passed over). The owner may be asked again before
// it is back: a start granted here and reported only to it would leave
// this clock spacing the next start from the lease, not the real start.
func (a ipKeys) reportStart(h *host, start, now time.Time) {
	if owner := a.srv.peers.ownerOf(h.clock); owner != nil {
		owner.started(session.SlotStart{Key: h.clock, Ago: now.Sub(start), Delay: h.delay})
	}
	a.srv.clocks.started(h.clock, start, h.delay, now)
}

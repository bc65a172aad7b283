package frontier

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
)

// Per-IP politeness across schedulers. A host's shard is a hash of its
// host name, so host names on one IP are held by different schedulers;
// the clock of an IP key (campaign.IPKey) is therefore owned by one
// scheduler, the first of ServerConfig.Peers by rendezvous hash of the key
// among those this one can reach. The others ask the owner for each start
// over a link of their own (OpSlots), asks batched while one is in
// flight, and report the starts their fetchers made under it. The asking
// actor never waits for an answer: its host waits, as for a turn on a
// local clock, and the answer is posted back to the actor.

// peerRetry: a peer that failed a request is passed over as an owner for
// this long, then tried again.
const peerRetry = 10 * time.Second

// peerTimeout bounds one request to a peer, dial included.
const peerTimeout = 5 * time.Second

// errPeerClosed answers the asks still queued when the scheduler closes.
var errPeerClosed = errors.New("scheduler closing")

// slotAnswer is an owner's answer to one ask: how long to wait (0: the
// start is taken now), or why there is none.
type slotAnswer struct {
	wait time.Duration
	err  error
}

type peerAsk struct {
	ask  session.SlotAsk
	done func(slotAnswer)
}

// slotAsker sends asks to the owner of a key: a peerLink, or a fake in
// tests.
type slotAsker interface {
	ask(a session.SlotAsk, done func(slotAnswer))
	started(s session.SlotStart)
	down() bool
	close()
}

// peerSet is this scheduler's view of the schedulers that share IP keys.
type peerSet struct {
	self  string
	addrs []string
	dial  func(addr string) slotAsker
	mu    sync.Mutex
	links map[string]slotAsker
}

// newPeerSet returns the peers of self among addrs; nil when there are
// none (every key is then this scheduler's own).
func newPeerSet(self string, addrs []string, dial func(addr string) slotAsker) *peerSet {
	var others int
	for _, a := range addrs {
		if a != self {
			others++
		}
	}
	if others == 0 {
		return nil
	}
	return &peerSet{self: self, addrs: addrs, dial: dial, links: map[string]slotAsker{}}
}

// sharedKey reports whether key's clock is shared by the schedulers (an IP
// key) rather than held by the scheduler that holds the key's shard.
func sharedKey(key string) bool { return strings.HasPrefix(key, "ip:") }

// rendezvous is addr's score for key: the highest among the schedulers
// owns the key. Every scheduler computes the same.
func rendezvous(addr, key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(addr))
	h.Write([]byte{0})
	h.Write([]byte(key))
	x := h.Sum64()
	// FNV's low bits mix poorly for inputs that differ at the end: a
	// finalizer (splitmix64's) spreads them.
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// ownerOf is the link to the scheduler that owns key's clock, nil when
// this scheduler does (or key is not shared). A peer that failed lately
// (peerRetry) is passed over, so that the key goes to the next in
// rendezvous order: at worst, this scheduler.
func (p *peerSet) ownerOf(key string) slotAsker {
	if p == nil || !sharedKey(key) {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var best slotAsker
	var bestScore uint64
	found := false
	for _, addr := range p.addrs {
		score := rendezvous(addr, key)
		if found && score <= bestScore {
			continue
		}
		if addr == p.self {
			best, bestScore, found = nil, score, true
			continue
		}
		l := p.links[addr]
		if l == nil {
			l = p.dial(addr)
			p.links[addr] = l
		}
		if l.down() {
			continue
		}
		best, bestScore, found = l, score, true
	}
	return best
}

func (p *peerSet) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		l.close()
	}
}

// peerLink is one scheduler's link to another: one control session,
// dialled when first needed and again after a failure, carrying the
// asks queued meanwhile in one request.
type peerLink struct {
	addr   string
	client session.Client
	log    *slog.Logger

	mu        sync.Mutex
	asks      []peerAsk
	starts    []session.SlotStart
	downUntil time.Time
	closed    bool
	kick      chan struct{}
	quit      chan struct{}
}

func newPeerLink(addr string, client session.Client, log *slog.Logger) *peerLink {
	l := &peerLink{addr: addr, client: client, log: log.With("peer", addr), kick: make(chan struct{}, 1), quit: make(chan struct{})}
	go l.loop()
	return l
}

func (l *peerLink) ask(a session.SlotAsk, done func(slotAnswer)) {
	l.mu.Lock()
	l.asks = append(l.asks, peerAsk{a, done})
	l.mu.Unlock()
	l.poke()
}

// started queues a start report; it goes with the next request, which it
// starts if none is due.
func (l *peerLink) started(s session.SlotStart) {
	l.mu.Lock()
	if len(l.starts) < 4096 { // a peer long away: the oldest reports are enough
		l.starts = append(l.starts, s)
	}
	l.mu.Unlock()
	l.poke()
}

func (l *peerLink) poke() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

func (l *peerLink) down() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Before(l.downUntil)
}

func (l *peerLink) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.quit)
	}
}

func (l *peerLink) loop() {
	var ctl *session.Control
	defer func() {
		if ctl != nil {
			ctl.Close()
		}
		l.failAll(errPeerClosed)
	}()
	for {
		select {
		case <-l.quit:
			return
		case <-l.kick:
		}
		l.mu.Lock()
		asks, starts := l.asks, l.starts
		l.asks, l.starts = nil, nil
		l.mu.Unlock()
		if len(asks) == 0 && len(starts) == 0 {
			continue
		}
		ctl, _ = l.send(ctl, asks, starts)
	}
}

// send makes one request of asks and starts over ctl (dialled when nil),
// and hands each ask its answer; it returns the session to use next (nil
// after a failure, which every ask is answered with). A request that
// fails is made once more on a new session: the peer ends a control
// session idle for 5 minutes.
func (l *peerLink) send(ctl *session.Control, asks []peerAsk, starts []session.SlotStart) (*session.Control, error) {
	ctx, cancel := context.WithTimeout(context.Background(), peerTimeout)
	defer cancel()
	req := make([]session.SlotAsk, len(asks))
	for i, a := range asks {
		req[i] = a.ask
	}
	var waits []time.Duration
	err := errors.New("not sent")
	for try := 0; try < 2 && err != nil; try++ {
		if ctl == nil {
			if ctl, err = l.client.DialControl(ctx, l.addr); err != nil {
				break
			}
		}
		if waits, err = ctl.Slots(ctx, req, starts); err != nil {
			ctl.Close()
			ctl = nil
		}
	}
	if err != nil {
		// Passed over before the asks hear of it, so that they go on to
		// the next owner.
		l.log.Warn("peer scheduler unreachable; its IP keys go to the next scheduler", "err", err, "retry_in", peerRetry)
		l.mu.Lock()
		l.downUntil = time.Now().Add(peerRetry)
		l.mu.Unlock()
		for _, a := range asks {
			a.done(slotAnswer{err: err})
		}
		return nil, err
	}
	for i, a := range asks {
		a.done(slotAnswer{wait: waits[i]})
	}
	return ctl, nil
}

func (l *peerLink) failAll(err error) {
	l.mu.Lock()
	asks := l.asks
	l.asks = nil
	l.mu.Unlock()
	for _, a := range asks {
		a.done(slotAnswer{err: err})
	}
}

// answer answers a peer's OpSlots on this scheduler's clocks: the starts
// reported first, then one wait per ask.
func (c *hostClocks) answer(asks []session.SlotAsk, starts []session.SlotStart, now time.Time) []time.Duration {
	for _, s := range starts {
		c.started(s.Key, now.Add(-s.Ago), s.Delay, now)
	}
	waits := make([]time.Duration, len(asks))
	for i, a := range asks {
		waits[i] = max(c.slot(a.Key, a.From, a.Delay, now).Sub(now), 0)
	}
	return waits
}

// askID names a campaign of this scheduler on another's clock.
func askID(self, campaign string) string { return self + "/" + campaign }

// IPOwner is the scheduler among peers (DROVER_SCHEDULER's addresses)
// that owns the clock of ip's politeness key while every one of them is
// reachable: the same answer on every scheduler.
func IPOwner(peers []string, ip string) string {
	key := campaign.IPKey(ip)
	var best string
	var bestScore uint64
	for i, p := range peers {
		if s := rendezvous(p, key); i == 0 || s > bestScore {
			best, bestScore = p, s
		}
	}
	return best
}

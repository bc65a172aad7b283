package frontier

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakePeer is a slotAsker that keeps its asks for the test to answer.
type fakePeer struct {
	addr   string
	isDown bool
	asks   []peerAsk
	starts []session.SlotStart
}

func (f *fakePeer) ask(a session.SlotAsk, done func(slotAnswer)) {
	f.asks = append(f.asks, peerAsk{a, done})
}
func (f *fakePeer) started(s session.SlotStart) { f.starts = append(f.starts, s) }
func (f *fakePeer) down() bool                  { return f.isDown }
func (f *fakePeer) close()                      {}

func fakePeers(self string, addrs []string) (*peerSet, map[string]*fakePeer) {
	fakes := map[string]*fakePeer{}
	p := newPeerSet(self, addrs, func(addr string) slotAsker {
		f := &fakePeer{addr: addr}
		fakes[addr] = f
		return f
	})
	return p, fakes
}

// ownerAddr is the address ownerOf names: self for nil.
func ownerAddr(p *peerSet, key string) string {
	if o := p.ownerOf(key); o != nil {
		return o.(*fakePeer).addr
	}
	return p.self
}

// Every scheduler names the same owner for an IP key, the owners spread
// over the schedulers, a peer that failed is passed over for the next in
// rendezvous order (this scheduler at worst), and a key of another kind
// is always the scheduler's own.
func TestIPKeyOwner(t *testing.T) {
	addrs := []string{"10.0.0.1:7420", "10.0.0.2:7420", "10.0.0.3:7420"}
	views := make([]*peerSet, len(addrs))
	for i, a := range addrs {
		views[i], _ = fakePeers(a, addrs)
	}
	owned := map[string]int{}
	for n := range 300 {
		key := campaign.IPKey(fmt.Sprintf("192.0.2.%d", n))
		want := IPOwner(addrs, key[len("ip:"):])
		for i, v := range views {
			require.Equal(t, want, ownerAddr(v, key), "%s: scheduler %d's owner, want IPOwner's", key, i)
		}
		owned[want]++
	}
	for _, a := range addrs {
		assert.GreaterOrEqual(t, owned[a], 60, "%s owns %d of 300 IP keys: %v", a, owned[a], owned)
	}
	assert.True(t, views[0].ownerOf("www.example.org") == nil, "a host key is asked of another scheduler")
	assert.True(t, views[0].ownerOf("domain:example.org") == nil, "a domain key is asked of another scheduler")
	// A key another scheduler owns goes to the next one while its owner
	// is down, and to this one when every other is.
	v, fakes := fakePeers(addrs[0], addrs)
	var key string
	for n := 0; key == ""; n++ {
		if k := campaign.IPKey(fmt.Sprintf("198.51.100.%d", n)); ownerAddr(v, k) == addrs[1] {
			key = k
		}
	}
	fakes[addrs[1]].isDown = true
	next := ownerAddr(v, key)
	require.NotEqual(t, addrs[1], next, "%s: a down owner is still asked", key)
	if fakes[addrs[2]] != nil {
		fakes[addrs[2]].isDown = true
	}
	assert.Equal(t, addrs[0], ownerAddr(v, key), "%s: with every other scheduler down, its owner, want this one", key)
	fakes[addrs[1]].isDown = false
	assert.Equal(t, addrs[1], ownerAddr(v, key), "%s: back up, its owner", key)
	alone := newPeerSet(addrs[0], addrs[:1], nil)
	assert.Nil(t, alone, "a scheduler alone asks another for an IP key")
	assert.True(t, alone.ownerOf(key) == nil, "a scheduler alone asks another for an IP key")
}

// The owner's own campaign and another scheduler's, asking over the link
// (answer), take turns on one IP clock: every two starts the delay apart,
// each campaign a fair share, whatever their lateness.
func TestIPClockSharedWithAPeer(t *testing.T) {
	const d = time.Second
	key := campaign.IPKey("192.0.2.7")
	for seed := range uint64(10) {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := newHostClocks()
		t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
		late := func() time.Duration {
			if rng.IntN(3) == 0 {
				return time.Duration(rng.Int64N(int64(d)))
			}
			return 0
		}
		// The remote campaign hears the answer a round trip late and
		// reports its start a lease's transit later again.
		const rtt = 2 * time.Millisecond
		ask := []time.Time{t0, t0.Add(late())}
		var starts []time.Time
		n := [2]int{}
		for len(starts) < 200 {
			i := 0
			if ask[1].Before(ask[0]) {
				i = 1
			}
			now := ask[i]
			var wait time.Duration
			if i == 0 {
				wait = c.slot(key, "local", d, now).Sub(now)
			} else {
				wait = c.answer([]session.SlotAsk{{Key: key, From: askID("10.0.0.2:7420", "c~r"), Delay: d}}, nil, now)[0]
			}
			if wait > 0 {
				ask[i] = now.Add(wait).Add(late())
				continue
			}
			start := now
			if i == 1 {
				start = now.Add(rtt)
				c.answer(nil, []session.SlotStart{{Key: key, Ago: rtt, Delay: d}}, start.Add(rtt))
			}
			starts = append(starts, start)
			n[i]++
			ask[i] = start.Add(d).Add(late())
		}
		slices.SortFunc(starts, time.Time.Compare)
		for j := 1; j < len(starts); j++ {
			gap := starts[j].Sub(starts[j-1])
			require.GreaterOrEqual(t, gap, d-rtt, "seed %d: starts %d and %d %s apart, want at least %s", seed, j-1, j, gap, d-rtt)
		}
		for i, k := range n {
			share := float64(k) / float64(len(starts))
			assert.GreaterOrEqual(t, share, 0.4, "seed %d: campaign %d got %d of %d starts", seed, i, k, len(starts))
		}
	}
}

// ipActor is a campaign actor keyed by IP on a scheduler whose IP keys
// another scheduler owns: enough of one for takeSlot, onSlot and place.
func ipActor(t *testing.T) (*campaignActor, *fakePeer) {
	t.Helper()
	addrs := []string{"10.0.0.1:7420", "10.0.0.2:7420"}
	peers, fakes := fakePeers(addrs[0], addrs)
	srv := &Server{clocks: newHostClocks(), places: newKeyPlaces(), peers: peers, log: slog.Default()}
	a := &campaignActor{srv: srv, cfg: campaign.Config{PolitenessKey: campaign.KeyIP}, key: "c~r", log: slog.Default(),
		hosts: map[string]*host{}, keyWaiting: map[string]map[*host]struct{}{},
		keyAsks: map[string]*keyAsk{}, ready: hostHeap{ready: true}, events: make(chan func(), 16), done: make(chan struct{})}
	var ip string
	for n := 0; ip == ""; n++ {
		if k := fmt.Sprintf("192.0.2.%d", n); ownerAddr(peers, campaign.IPKey(k)) == addrs[1] {
			ip = k
		}
	}
	for i := range 3 {
		h := &host{name: fmt.Sprintf("h%d.example", i), clock: fmt.Sprintf("h%d.example", i), delay: time.Second, conc: 1, index: -1}
		h.queue = entryHeap{{seq: uint64(i)}}
		a.hosts[h.name] = h
		a.ipKeys().learnIP(h, ip)
	}
	return a, fakes[addrs[1]]
}

// Hosts whose IP another scheduler owns never make the actor wait: each
// asks and is put aside, one ask goes out for the key however many of
// its hosts come, and the answer, posted to the actor, lets the host
// that asked start once, the others ask again.
func TestRemoteSlotDoesNotWait(t *testing.T) {
	a, owner := ipActor(t)
	now := time.Now()
	var hs []*host
	for _, name := range []string{"h0.example", "h1.example", "h2.example"} {
		h := a.hosts[name]
		hs = append(hs, h)
		require.False(t, a.takeSlot(h, now), "%s started without the owner's answer", name)
		a.leaser().place(h, now)
		require.Equal(t, inWaiting, h.where, "%s is not put aside while its ask is out", name)
	}
	require.Len(t, owner.asks, 1, "asks for one key")
	// The owner takes a start now; its answer comes on the actor.
	owner.asks[0].done(slotAnswer{})
	select {
	case f := <-a.events:
		f()
	case <-time.After(5 * time.Second):
		require.FailNow(t, "the answer never reached the actor")
	}
	now = time.Now()
	require.True(t, a.takeSlot(hs[0], now), "the host that asked cannot start on the owner's answer")
	require.False(t, a.takeSlot(hs[0], now), "one start taken twice")
	require.False(t, a.takeSlot(hs[1], now), "a host started on another host's start")
	require.Len(t, owner.asks, 2, "asks after the first answer")
	// A failed ask lets the waiting hosts ask the next owner: here, the
	// scheduler itself once the owner is down.
	owner.asks[1].done(slotAnswer{err: errPeerClosed})
	(<-a.events)()
	owner.isDown = true
	now = time.Now()
	require.False(t, a.takeSlot(hs[1], now), "with its owner down, this scheduler's new clock of the key started at once: the owner's last start may be a moment ago")
	require.Len(t, owner.asks, 2, "the owner down, asks, want still 2")
	require.True(t, a.takeSlot(hs[1], hs[1].next), "with its owner down, the key's clock is not this scheduler's")
}

// fakeOwner is a scheduler's control side reduced to op slots: it answers
// each ask with wait, and ends each session after one request, as a
// scheduler ends a control session left idle.
func fakeOwner(t *testing.T, wait time.Duration) (addr string, sessions *atomic.Int64) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	sessions = &atomic.Int64{}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			sessions.Add(1)
			go func() {
				defer c.Close()
				fr, fw := session.NewFrameReader(c), session.NewFrameWriter(c)
				if _, _, err := fr.ReadFrame(); err != nil {
					return
				}
				_ = fw.WriteFrame(session.FrameWelcome, session.Welcome{Version: session.ProtocolVersion})
				_ = fw.Flush()
				ft, payload, err := fr.ReadFrame()
				if err != nil {
					return
				}
				var req session.Request
				_ = session.Decode(ft, payload, &req)
				waits := make([]time.Duration, len(req.Slots))
				for i := range waits {
					waits[i] = wait
				}
				_ = fw.WriteFrame(session.FrameReply, session.Reply{Waits: waits})
				_ = fw.Flush()
			}()
		}
	}()
	return ln.Addr().String(), sessions
}

// A link whose session the owner ended dials again and gets its answer;
// a link whose owner is gone answers its asks with the error and is
// passed over.
func TestPeerLinkRedialsAndFails(t *testing.T) {
	addr, sessions := fakeOwner(t, 250*time.Millisecond)
	l := newPeerLink(addr, session.Client{Token: "t"}, slog.Default())
	t.Cleanup(l.close)
	ask := func() slotAnswer {
		got := make(chan slotAnswer, 1)
		l.ask(session.SlotAsk{Key: "ip:192.0.2.1", From: "x/c", Delay: time.Second}, func(a slotAnswer) { got <- a })
		select {
		case a := <-got:
			return a
		case <-time.After(2 * peerTimeout):
			require.FailNow(t, "an ask was never answered")
			return slotAnswer{}
		}
	}
	for i := range 3 {
		a := ask()
		require.NoError(t, a.err, "ask %d: %+v, want a wait of 250ms", i, a)
		require.Equal(t, 250*time.Millisecond, a.wait, "ask %d: %+v, want a wait of 250ms", i, a)
	}
	n := sessions.Load()
	require.GreaterOrEqual(t, n, int64(3), "sessions for 3 asks, each ended after one (down %v)", l.down())
	require.False(t, l.down(), "down after 3 asks (%d sessions)", n)
	dead := newPeerLink("127.0.0.1:1", session.Client{Token: "t"}, slog.Default())
	t.Cleanup(dead.close)
	l = dead
	require.Error(t, ask().err, "an ask of an owner that is gone has no error")
	assert.True(t, dead.down(), "an owner that is gone is not passed over")
}

// A start granted on this scheduler's clock while the owner was passed
// over, whose outcome comes once the owner is asked again (its pass-over
// ran out, at the moment the outcome is reported), moves this scheduler's
// clock too: a report the owner may never receive (it is still dead)
// must not leave the local clock spacing the next start from the lease
// instead of from the request's real start.
func TestStartReportedToAReturningOwnerMovesTheLocalClock(t *testing.T) {
	a, owner := ipActor(t)
	h := a.hosts["h0.example"]
	owner.isDown = true
	now := time.Now()
	require.False(t, a.takeSlot(h, now), "this scheduler's new clock of the key started at once")
	granted := h.next
	require.True(t, a.takeSlot(h, granted), "with its owner down, the key's clock is not this scheduler's")
	// The request really started 40 ms after the lease; its outcome comes
	// after the owner's pass-over ran out.
	owner.isDown = false
	start := granted.Add(40 * time.Millisecond)
	a.ipKeys().reportStart(h, start, start.Add(100*time.Millisecond))
	require.Len(t, owner.starts, 1, "starts reported to the owner")
	owner.isDown = true
	next := a.srv.clocks.slot(h.clock, a.key, h.delay, granted.Add(h.delay))
	want := start.Add(h.delay)
	assert.False(t, next.Before(want), "the next start on this scheduler's clock at %s after the lease; the request started %s after it, so not before %s",
		next.Sub(granted), start.Sub(granted), want.Sub(granted))
}

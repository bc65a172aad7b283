// Leasing: hosts wait in two heaps (ready by priority, waiting by time),
// and dispatch hands the next ready URL of each to a session with credit;
// leases expire, are renewed by a session's pings, and go back when their
// session ends.

package frontier

import (
	"container/heap"
	"fmt"
	"time"

	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// leaser is the campaign's actor seen from leasing its URLs: it keeps
// its hosts in the heap their state calls for (place), leases the ready
// hosts' URLs to the sessions with credit (dispatch, leaseFrom), ends,
// returns and expires leases (endLease, returnLease, expireLeases), and
// takes, drops and renews the sessions that hold them (addSession,
// removeSession, renew). Actor goroutine only.
type leaser struct{ *campaignActor }

// leaser returns a's leaser.
func (a *campaignActor) leaser() leaser { return leaser{a} }

// place puts h in the heap its state calls for.
func (a leaser) place(h *host, now time.Time) {
	switch h.where {
	case inReady:
		a.ready.remove(h)
	case inWaiting:
		a.waiting.remove(h)
	}
	h.where = inNone
	h.endIdleTurn(now)
	if h.inflight >= max(h.conc, 1) || a.hostCapWaits(h) {
		return
	}
	if !h.hasWork() {
		return
	}
	if a.keyLine().full(h, now) {
		a.keyLine().wait(h)
		return
	}
	h.wake = h.next
	if h.remote.asking {
		h.wake = maxTime(h.wake, h.remote.askBy)
	}
	if h.robots != nil && h.robots.Unreachable {
		h.wake = maxTime(h.wake, h.robotsAt)
	}
	if h.wake.After(now) {
		h.where = inWaiting
		heap.Push(&a.waiting, h)
		return
	}
	h.best = h.queue[0].prio
	h.where = inReady
	heap.Push(&a.ready, h)
}

// hostCapWaits: h's pages fetched and leases out reach max-pages-per-host,
// but its pages alone do not. Its URLs wait for the leases' outcomes
// rather than being dropped: a lease that fails leaves room for another.
func (a leaser) hostCapWaits(h *host) bool {
	m := a.cfg.MaxPagesPerHost
	return m > 0 && h.fetched < m && h.fetched+int64(h.inflight) >= m
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// dispatch leases ready hosts' URLs to sessions with credit.
func (a leaser) dispatch() {
	now := time.Now()
	for a.waiting.Len() > 0 && !a.waiting.hs[0].wake.After(now) {
		h := heap.Pop(&a.waiting).(*host)
		h.where = inNone
		a.place(h, now)
	}
	if a.stopping || a.capReached() || a.recorder().recordBacklogged() {
		a.setTimer(now)
		return
	}
	batches := map[*fetcherSession][]session.Lease{}
	sessions := a.sessionsWithCredit()
	si := 0
	for a.ready.Len() > 0 && len(sessions) > 0 {
		h := heap.Pop(&a.ready).(*host)
		h.where = inNone
		s := sessions[si%len(sessions)]
		l, ok := a.leaseFrom(h, s, now)
		if ok {
			batches[s] = append(batches[s], l)
			s.credit--
			if s.credit == 0 {
				sessions = append(sessions[:si%len(sessions)], sessions[si%len(sessions)+1:]...)
			} else {
				si++
			}
			if a.capReached() {
				break
			}
		}
		a.place(h, now)
	}
	for s, ls := range batches {
		s.send(session.FrameLeases, session.Leases{Items: ls})
	}
	a.setTimer(now)
}

// HostTurn is how many leases in a row a host takes ahead of the ready
// hosts of its priority that are not in a turn, as Heritrix's queue budget
// does: the leases a host gets come together, as far as its politeness
// lets them, rather than spread over every ready host in turn. Its
// connections stay open between them (a fetcher keeps few idle ones per
// host: at 10,000 hosts a round over all of them found none). A host with
// URLs and no turn waits while hosts in a turn are ready: for the rest of
// their turns, and the turns of hosts with older URLs (docs/design.md,
// "Hosts take turns").
const HostTurn = 512

// HostTurnIdle ends the turn of a host that had no lease for this long:
// its connections have closed (a server keeps an idle one about 5 s), and
// a host that comes back with new URLs (found late, or back from a park)
// has no claim on the hosts that waited meanwhile.
const HostTurnIdle = 5 * time.Second

// endIdleTurn ends h's turn when its last lease (h.next, a spacing after
// it) is HostTurnIdle old. Out of the heaps only: it changes the ready
// heap's key.
func (h *host) endIdleTurn(now time.Time) {
	if h.turnLeft > 0 && now.Sub(h.next) > HostTurnIdle {
		h.turnLeft = 0
	}
}

// takeTurn counts a lease of h against its turn, and begins one, after
// every turn begun so far, when it has none.
func (a leaser) takeTurn(h *host) {
	if h.turnLeft == 0 {
		a.turns++
		h.turn, h.turnLeft = a.turns, HostTurn
	}
	h.turnLeft--
}

func (a leaser) setTimer(now time.Time) {
	if a.waiting.Len() == 0 {
		return
	}
	at := a.waiting.hs[0].wake
	if !a.timerAt.IsZero() && !at.Before(a.timerAt) {
		return
	}
	a.timer.Reset(max(at.Sub(now), time.Millisecond))
	a.timerAt = at
}

// capReached: no more leases, as the pages fetched and those in flight
// reach max-pages. The campaign counts as capped (Stats.CapReached) only
// once pages fetched reach it: a lease in flight may still fail, and its
// URL's place then goes to another.
func (a leaser) capReached() bool {
	if a.cfg.MaxPages <= 0 {
		return false
	}
	done := a.fetched.Load() + a.failed.Load()
	if done >= a.cfg.MaxPages {
		a.capped.Store(true)
	}
	return done+a.inflight.Load() >= a.cfg.MaxPages
}

func (a leaser) sessionsWithCredit() []*fetcherSession {
	var out []*fetcherSession
	for s := range a.sessions {
		if s.credit > 0 {
			out = append(out, s)
		}
	}
	return out
}

// leaseFrom takes h's next URL (or its robots.txt) and leases it to s.
func (a leaser) leaseFrom(h *host, s *fetcherSession, now time.Time) (session.Lease, bool) {
	if a.keyLine().full(h, now) {
		return session.Lease{}, false // another host of its key took the last place
	}
	l := &lease{id: a.srv.nextLease.Add(1), h: h, s: s, deadline: now.Add(a.srv.cfg.LeaseTimeout), start: now}
	out := session.Lease{ID: l.id, Deadline: l.deadline}
	if a.ipKeys().needsResolve(h, s) {
		h.ip = ipResolving
		l.resolve = true
		out.Kind, out.URL = session.KindResolve, h.root
	} else if h.needsRobots(now) {
		if !a.takeSlot(h, now) {
			return session.Lease{}, false
		}
		h.robotsState = robotsFetching
		out.Kind = session.KindRobots
		out.URL = h.root
	} else {
		for {
			if len(h.queue) == 0 {
				return session.Lease{}, false
			}
			e := heap.Pop(&h.queue).(*entry)
			if re := a.live.Load().excluded(e.msg.URL); re != "" {
				delete(a.held, e.key)
				a.settler().dropRecorded(e, ReasonExcluded, "excluded by "+re)
				continue
			}
			if h.robots != nil && !h.robots.Allowed(urlrule.RobotsPath(e.msg.URL)) {
				a.disallowed.Add(1)
				delete(a.held, e.key)
				a.settler().dropRecorded(e, ReasonRobots, "disallowed by robots.txt")
				continue
			}
			if a.cfg.MaxPagesPerHost > 0 && h.fetched >= a.cfg.MaxPagesPerHost {
				a.skipped.Add(1)
				delete(a.held, e.key)
				a.settler().ackEntry(e)
				continue
			}
			if a.hostCapWaits(h) || !a.takeSlot(h, now) {
				// The leases out may reach the cap, or fail: wait for
				// them; or another campaign's request to the host
				// comes first: wait for this one's turn.
				heap.Push(&h.queue, e)
				return session.Lease{}, false
			}
			l.e = e
			out.URL, out.Depth, out.Hops, out.Parent, out.Score = e.msg.URL, e.msg.Depth, e.msg.Hops, e.msg.Parent, e.msg.Score
			out.Embeds, out.Path = e.msg.Embeds, e.msg.Path
			out.Attempt, out.MaxAttempts = e.attempt+1, a.cfg.MaxAttempts
			out.Prior, e.history = a.prior(e.key)
			break
		}
	}
	h.inflight++
	a.takeTurn(h)
	if l.resolve {
		// No request: nothing to space, nothing counted against a key.
		a.leases[l.id] = l
		s.leases[l.id] = struct{}{}
		a.inflight.Add(1)
		return out, true
	}
	l.key = a.keyLine().leased(h)
	h.next = now.Add(h.spacing())
	a.srv.m().leaseGranted(a.cfg.ID, l.e == nil)
	if l.e != nil && !l.e.arrived.IsZero() {
		a.srv.m().politenessWait(a.cfg.ID, now.Sub(l.e.arrived))
		l.e.arrived = time.Time{} // its first lease only
	}
	a.leases[l.id] = l
	s.leases[l.id] = struct{}{}
	a.inflight.Add(1)
	return out, true
}

// endLease removes a lease; the caller decides what becomes of its URL.
func (a leaser) endLease(l *lease, now time.Time) {
	delete(a.leases, l.id)
	delete(l.s.leases, l.id)
	l.h.inflight--
	a.inflight.Add(-1)
	a.keyLine().ended(l.key, now)
}

// returnLease puts a lost lease's URL back (or dead-letters a poison URL).
func (a leaser) returnLease(l *lease, why string, now time.Time) {
	a.endLease(l, now)
	if l.resolve {
		l.h.ip = ipUnknown
		a.place(l.h, now)
		return
	}
	if l.e == nil {
		if l.h.robotsState == robotsFetching {
			l.h.robotsState = robotsUnknown
		}
		a.place(l.h, now)
		return
	}
	if a.held[l.e.key] != l.e {
		return // its delivery is void (channel lost); a new one may be held
	}
	l.e.lost++
	if l.e.lost >= maxLost {
		delete(a.held, l.e.key)
		a.settler().deadLetter(l.e, ReasonLost, fmt.Sprintf("lease lost %d times (last: %s)", l.e.lost, why))
		a.place(l.h, now)
		return
	}
	a.settler().requeue(l.h, l.e)
	a.place(l.h, now)
}

func (a leaser) expireLeases() {
	now := time.Now()
	for _, l := range a.leases {
		if now.After(l.deadline) {
			a.log.Warn("lease expired", "url", l.urlOf(), "session", l.s.client)
			a.srv.m().leaseExpired(a.cfg.ID)
			a.returnLease(l, "deadline passed without a report", now)
		}
	}
}

func (l *lease) urlOf() string {
	if l.resolve {
		return l.h.root + " (resolve)"
	}
	if l.e == nil {
		return l.h.root + "/robots.txt"
	}
	return l.e.msg.URL
}

// --- sessions ----------------------------------------------------------

func (a leaser) addSession(s *fetcherSession) error {
	if a.stopping {
		return fmt.Errorf("campaign %s is closing on this scheduler", a.cfg.ID)
	}
	// Checked here, on the actor, so that an OpEnd racing this session's
	// hello either finds it in a.sessions or has its key recorded first.
	if a.srv.isEnded(s.key) {
		return errSessionEnded
	}
	if err := a.narrowerScope(s); err != nil {
		return err
	}
	if err := a.consumer().subscribeOrRepair(); err != nil {
		// RabbitMQ is away: the session is taken all the same and gets
		// leases once consuming works again (resubscribeIfDue).
		a.setConsumeErr(err.Error())
		if a.resubscribeAt.IsZero() {
			a.resubscribeAt = time.Now().Add(time.Second)
		}
		a.log.Warn("cannot consume the campaign's queues yet; the session waits", "err", err)
	}
	a.sessions[s] = struct{}{}
	a.nsessions.Store(int64(len(a.sessions)))
	// Rules newer than its config's (an Update while it was away).
	a.pushRules(s)
	return nil
}

func (a leaser) removeSession(s *fetcherSession) {
	if _, ok := a.sessions[s]; !ok {
		return
	}
	delete(a.sessions, s)
	a.nsessions.Store(int64(len(a.sessions)))
	now := time.Now()
	for id := range s.leases {
		if l := a.leases[id]; l != nil {
			a.srv.m().leaseReturned(a.cfg.ID)
			a.returnLease(l, "session closed", now)
		}
	}
}

func (a leaser) renew(s *fetcherSession) {
	deadline := time.Now().Add(a.srv.cfg.LeaseTimeout)
	for id := range s.leases {
		if l := a.leases[id]; l != nil && l.start.Add(a.srv.cfg.MaxLease).After(deadline) {
			l.deadline = deadline
		}
	}
}

package frontier

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
)

// holdWindow bounds how far ahead the scheduler holds a host's URLs: a URL
// whose turn is further away is parked (re-published to a parking queue,
// confirmed, then acked), so no delivery stays unacked anywhere near
// RabbitMQ's consumer_timeout and no host fills its shard's prefetch window.
const holdWindow = 30 * time.Second

// maxLost: a URL whose lease was lost this many times (its fetcher died or
// never reported) is a poison URL and goes to the dead-letter queue.
const maxLost = 3

// lease is a URL handed to a session.
type lease struct {
	id       uint64
	e        *entry // nil for a robots lease
	h        *host
	s        *session
	deadline time.Time
	start    time.Time
}

// campaignActor owns one campaign on one scheduler. Its state is touched
// only by its loop goroutine; everything else posts closures to it.
type campaignActor struct {
	srv    *Server
	cfg    campaign.Config
	topo   Topology
	policy Policy
	scope  *fetch.Scope // for the sitemaps a robots.txt names
	log    *slog.Logger

	events chan func()
	done   chan struct{}
	// stopped is set by the closure that closes done: the loop runs nothing
	// after it, even what was already queued.
	stopped bool
	// stopping: the campaign is closing here; no new session, no lease, no
	// new goroutine.
	stopping bool
	// ctx ends the actor's goroutines (record, repost, sitemaps) when stop
	// gives up waiting for them; wg counts them.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	hosts    map[string]*host
	ready    hostHeap
	waiting  hostHeap
	sessions map[*session]struct{}
	leases   map[uint64]*lease
	held     map[Key]*entry // URLs held in memory or leased, by key
	seq      uint64
	timer    *time.Timer
	timerAt  time.Time

	consumeCh *amqp.Channel
	consuming bool
	// resubscribeAt: consuming broke while sessions need it; try again then
	// (with backoff resubscribeWait), and show consumeErr in the stats.
	resubscribeAt   time.Time
	resubscribeWait time.Duration
	consumeErr      atomic.Pointer[string]

	// publishing holds the links being published (not yet marked queued),
	// shared by the record goroutines: another record that finds one of its
	// links there waits for that publish's outcome before it acks its own
	// page.
	publishingMu sync.Mutex
	publishing   map[Key]*linkPublish
	idleSince    time.Time

	// counters (atomic: Stats reads them from the request goroutine too).
	// unacked counts deliveries received and not yet settled (acked,
	// nacked, or void because their channel closed).
	unacked, acked, pending                                    atomic.Int64
	fetched, failed, retried, disallowed, duplicates, deadLtrd atomic.Int64
	skipped, discovered, published, recordFailed               atomic.Int64
	inflight                                                   atomic.Int64
	nhosts, nsessions, hostsDown                               atomic.Int64
	capped                                                     atomic.Bool
	isConsuming                                                atomic.Bool // consuming, for Stats
	reasonsMu                                                  sync.Mutex
	reasons                                                    map[string]int64 // failures by reason
}

func newCampaignActor(srv *Server, cfg campaign.Config) (*campaignActor, error) {
	p, err := PolicyByName(cfg.Priority)
	if err != nil {
		return nil, err
	}
	scope, err := fetch.NewScope(cfg)
	if err != nil {
		return nil, err
	}
	a := &campaignActor{
		scope:      scope,
		srv:        srv,
		cfg:        cfg,
		topo:       Topology{Campaign: cfg.ID},
		policy:     p,
		log:        srv.log.With("campaign", cfg.ID),
		events:     make(chan func(), 1024),
		done:       make(chan struct{}),
		hosts:      map[string]*host{},
		ready:      hostHeap{ready: true},
		sessions:   map[*session]struct{}{},
		leases:     map[uint64]*lease{},
		held:       map[Key]*entry{},
		publishing: map[Key]*linkPublish{},
		reasons:    map[string]int64{},
		timer:      time.NewTimer(time.Hour),
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	go a.loop()
	return a, nil
}

// post queues f to run on the actor's goroutine; false when the actor has
// ended. Once it has, post says so every time; f queued just before the end
// may still not run, so a caller that waits for f uses call.
func (a *campaignActor) post(f func()) bool {
	select {
	case <-a.done:
		return false
	default:
	}
	select {
	case a.events <- f:
		return true
	case <-a.done:
		return false
	}
}

// call runs f on the actor's goroutine and waits for it; false when the
// actor ended without running it.
func (a *campaignActor) call(f func()) bool {
	ran := make(chan struct{})
	if !a.post(func() { f(); close(ran) }) {
		return false
	}
	select {
	case <-ran:
		return true
	case <-a.done:
		select {
		case <-ran:
			return true
		default:
			return false
		}
	}
}

// spawn runs f in a goroutine that stop waits for; only the actor's
// goroutine spawns, and not once the actor is stopping (the work is then
// left undone: its delivery goes back to its queue with the channel).
func (a *campaignActor) spawn(f func(ctx context.Context)) bool {
	if a.stopping {
		return false
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		f(a.ctx)
	}()
	return true
}

func (a *campaignActor) loop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case f := <-a.events:
			f()
			// Take whatever else is waiting before leasing: leases then go
			// out in batches.
			for n := 0; n < 256 && !a.stopped; n++ {
				select {
				case f := <-a.events:
					f()
					continue
				default:
				}
				break
			}
		case <-a.timer.C:
			a.timerAt = time.Time{}
		case <-tick.C:
			a.expireLeases()
			a.releaseIfIdle()
			a.resubscribeIfDue()
		case <-a.done:
			return
		}
		if a.stopped {
			return
		}
		if a.consuming {
			a.dispatch()
		}
	}
}

// --- consuming ---------------------------------------------------------

// subscribe starts consuming the campaign's shards: first this scheduler's
// own share, then, as a standby, the others (single-active-consumer makes
// the first subscriber of a shard its owner).
func (a *campaignActor) subscribe() error {
	if a.consuming {
		return nil
	}
	if a.stopping {
		return fmt.Errorf("campaign %s is closing", a.cfg.ID)
	}
	ch, err := a.srv.conn.Channel()
	if err != nil {
		return fmt.Errorf("open consume channel: %w", err)
	}
	if err := ch.Qos(a.srv.cfg.Prefetch, 0, false); err != nil {
		ch.Close()
		return fmt.Errorf("qos: %w", err)
	}
	// Before Consume, so that no close goes unseen.
	closed := ch.NotifyClose(make(chan *amqp.Error, 1))
	order := make([]int, 0, Shards)
	for i := range Shards {
		if i%a.srv.cfg.Replicas == a.srv.cfg.Index {
			order = append(order, i)
		}
	}
	for i := range Shards {
		if i%a.srv.cfg.Replicas != a.srv.cfg.Index {
			order = append(order, i)
		}
	}
	for _, shard := range order {
		ds, err := ch.Consume(a.topo.Shard(shard), "", false, false, false, false, nil)
		if err != nil {
			ch.Close()
			return fmt.Errorf("consume %s: %w", a.topo.Shard(shard), err)
		}
		go a.forward(ch, shard, ds)
	}
	go func() {
		if err, ok := <-closed; ok && err != nil {
			a.post(func() { a.consumeLost(ch, err.Error()) })
		}
	}()
	a.consumeCh = ch
	a.consuming = true
	a.isConsuming.Store(true)
	a.resubscribeAt, a.resubscribeWait = time.Time{}, 0
	a.consumeErr.Store(nil)
	a.log.Info("consuming shards", "own", len(order)/a.srv.cfg.Replicas, "replicas", a.srv.cfg.Replicas)
	return nil
}

// forward hands a shard's deliveries to the actor. Its end, other than by
// release, means consuming broke: the channel closed, or RabbitMQ cancelled
// the consumer (its queue was deleted).
func (a *campaignActor) forward(ch *amqp.Channel, shard int, ds <-chan amqp.Delivery) {
	for d := range ds {
		a.unacked.Add(1)
		if !a.post(func() { a.onDelivery(ch, shard, d) }) {
			a.unacked.Add(-1)
			return
		}
	}
	a.post(func() {
		a.consumeLost(ch, fmt.Sprintf("consumer of %s ended (cancelled by RabbitMQ)", a.topo.Shard(shard)))
	})
}

// consumeLost: the consume channel failed, or one of its consumers was
// cancelled. The channel is closed (RabbitMQ requeues every delivery on
// it), what the scheduler held for it is void, and consuming starts again
// at once while sessions need it, then with backoff.
func (a *campaignActor) consumeLost(ch *amqp.Channel, why string) {
	if ch != a.consumeCh {
		return
	}
	a.log.Warn("consuming broke; the deliveries held went back to their queues", "reason", why)
	a.consumeCh = nil
	a.consuming = false
	a.isConsuming.Store(false)
	a.dropHeld()
	go ch.Close() // may wait on RabbitMQ; the actor does not
	a.setConsumeErr(why)
	if len(a.sessions) > 0 && !a.stopping {
		a.resubscribeAt = time.Now()
		a.resubscribeIfDue()
	}
}

func (a *campaignActor) setConsumeErr(why string) { a.consumeErr.Store(&why) }

// resubscribeIfDue retries consuming after it broke, with backoff (1 s,
// doubling to 30 s). While it fails, the reason is in the campaign's stats
// (ConsumeError), so `starter status` shows it; the fetchers' sessions stay
// open and get leases as soon as it works again.
func (a *campaignActor) resubscribeIfDue() {
	if a.consuming || a.resubscribeAt.IsZero() || a.stopping || time.Now().Before(a.resubscribeAt) {
		return
	}
	if len(a.sessions) == 0 {
		a.resubscribeAt = time.Time{}
		return
	}
	if err := a.subscribe(); err != nil {
		a.resubscribeWait = min(max(2*a.resubscribeWait, time.Second), 30*time.Second)
		a.resubscribeAt = time.Now().Add(a.resubscribeWait)
		a.setConsumeErr(err.Error())
		a.log.Error("consuming again failed; retrying", "err", err, "in", a.resubscribeWait)
	}
}

// dropHeld forgets every held delivery (their channel is gone, so RabbitMQ
// has requeued them); leases out stay valid for their fetchers, but their
// outcomes can no longer ack.
func (a *campaignActor) dropHeld() {
	for k, e := range a.held {
		a.settle(e)
		delete(a.held, k)
	}
	for _, h := range a.hosts {
		h.queue = nil
		a.place(h, time.Now())
	}
}

// release stops consuming: closing the channel returns every unacked
// delivery to its queue (and lets a standby scheduler take the shards).
func (a *campaignActor) release() {
	if !a.consuming {
		return
	}
	ch := a.consumeCh
	a.consumeCh = nil
	a.consuming = false
	a.isConsuming.Store(false)
	a.dropHeld()
	if ch != nil {
		ch.Close()
	}
	a.log.Info("released shards")
}

func (a *campaignActor) releaseIfIdle() {
	if len(a.sessions) > 0 || !a.consuming {
		a.idleSince = time.Time{}
		return
	}
	if a.idleSince.IsZero() {
		a.idleSince = time.Now()
		return
	}
	if time.Since(a.idleSince) > a.srv.cfg.IdleRelease && a.pending.Load() == 0 {
		a.release()
	}
}

// --- deliveries --------------------------------------------------------

func (a *campaignActor) onDelivery(ch *amqp.Channel, shard int, d amqp.Delivery) {
	if ch != a.consumeCh {
		a.unacked.Add(-1)
		return // from a channel already closed: RabbitMQ requeued it
	}
	m, err := decodeMsg(d.Body)
	if err != nil {
		a.deadLetter(&entry{d: d, shard: shard}, ReasonUnreadable, fmt.Sprintf("unreadable message: %v", err))
		return
	}
	u, err := url.Parse(m.URL)
	hostName := ""
	if err == nil {
		hostName, err = fetch.HostKey(m.URL)
	}
	if err == nil && u.Scheme != "http" && u.Scheme != "https" {
		err = fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if err != nil {
		a.deadLetter(&entry{d: d, msg: m, shard: shard}, ReasonUnreadable, fmt.Sprintf("unparseable URL %q: %v", m.URL, err))
		return
	}
	k := KeyOf(m.URL)
	if _, ok := a.held[k]; ok {
		// In flight here: this copy is a duplicate message (a link published
		// twice); the entry held settles the URL.
		a.duplicates.Add(1)
		a.ack(d)
		return
	}
	if done, err := a.srv.store.Done(a.cfg.ID, k); err != nil {
		a.log.Error("seen store", "err", err)
	} else if done {
		a.duplicates.Add(1)
		a.ack(d)
		return
	}
	h := a.hosts[hostName]
	if h == nil {
		delay, conc := a.cfg.PolitenessFor(hostName)
		h = &host{name: hostName, root: u.Scheme + "://" + u.Host, delay: delay, conc: conc, index: -1}
		a.hosts[hostName] = h
		a.nhosts.Store(int64(len(a.hosts)))
	}
	a.seq++
	e := &entry{key: k, msg: m, d: d, shard: shard, attempt: headerInt(d.Headers, hdrAttempt), lost: headerInt(d.Headers, hdrLost), sinkFails: headerInt(d.Headers, hdrSinkFails), seq: a.seq}
	if d := h.downFor(originOf(m.URL)); d != nil {
		a.deadLetter(e, d.why, d.message(h, originOf(m.URL)))
		return
	}
	e.prio = a.policy.Priority(Item{URL: m.URL, Host: hostName, Depth: m.Depth, Score: m.Score, HostFetched: h.fetched})
	now := time.Now()
	if wait := a.expectedWait(h, now); wait > holdWindow {
		a.park(e, wait, e.attempt, e.lost, "", "")
		return
	}
	a.held[k] = e
	heap.Push(&h.queue, e)
	a.place(h, now)
}

// expectedWait estimates when a URL added now to h's queue would start.
func (a *campaignActor) expectedWait(h *host, now time.Time) time.Duration {
	wait := h.next.Sub(now)
	if wait < 0 {
		wait = 0
	}
	if h.robotsState == robotsReady && h.robots != nil && h.robots.Unreachable {
		wait = max(wait, h.robotsAt.Sub(now))
	}
	conc := max(h.conc, 1)
	return wait + time.Duration(len(h.queue)/conc)*h.delay
}

// --- leasing -----------------------------------------------------------

// place puts h in the heap its state calls for.
func (a *campaignActor) place(h *host, now time.Time) {
	switch h.where {
	case inReady:
		a.ready.remove(h)
	case inWaiting:
		a.waiting.remove(h)
	}
	h.where = inNone
	if h.inflight >= max(h.conc, 1) || a.hostCapWaits(h) {
		return
	}
	if !h.hasWork() {
		return
	}
	h.wake = h.next
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
func (a *campaignActor) hostCapWaits(h *host) bool {
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
func (a *campaignActor) dispatch() {
	now := time.Now()
	for a.waiting.Len() > 0 && !a.waiting.hs[0].wake.After(now) {
		h := heap.Pop(&a.waiting).(*host)
		h.where = inNone
		a.place(h, now)
	}
	if a.stopping || a.capReached() {
		a.setTimer(now)
		return
	}
	batches := map[*session][]Lease{}
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
		s.send(FrameLeases, Leases{Items: ls})
	}
	a.setTimer(now)
}

func (a *campaignActor) setTimer(now time.Time) {
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
func (a *campaignActor) capReached() bool {
	if a.cfg.MaxPages <= 0 {
		return false
	}
	done := a.fetched.Load() + a.failed.Load()
	if done >= a.cfg.MaxPages {
		a.capped.Store(true)
	}
	return done+a.inflight.Load() >= a.cfg.MaxPages
}

func (a *campaignActor) sessionsWithCredit() []*session {
	var out []*session
	for s := range a.sessions {
		if s.credit > 0 {
			out = append(out, s)
		}
	}
	return out
}

// leaseFrom takes h's next URL (or its robots.txt) and leases it to s.
func (a *campaignActor) leaseFrom(h *host, s *session, now time.Time) (Lease, bool) {
	l := &lease{id: a.srv.nextLease.Add(1), h: h, s: s, deadline: now.Add(a.srv.cfg.LeaseTimeout), start: now}
	out := Lease{ID: l.id, Deadline: l.deadline}
	if h.needsRobots(now) {
		h.robotsState = robotsFetching
		out.Kind = KindRobots
		out.URL = h.root
	} else {
		for {
			if len(h.queue) == 0 {
				return Lease{}, false
			}
			e := heap.Pop(&h.queue).(*entry)
			if h.robots != nil && !h.robots.Allowed(pathOf(e.msg.URL)) {
				a.disallowed.Add(1)
				delete(a.held, e.key)
				a.dropRecorded(e, ReasonRobots, "disallowed by robots.txt")
				continue
			}
			if a.cfg.MaxPagesPerHost > 0 && h.fetched >= a.cfg.MaxPagesPerHost {
				a.skipped.Add(1)
				delete(a.held, e.key)
				a.ackEntry(e)
				continue
			}
			if a.hostCapWaits(h) {
				// The leases out may reach the cap, or fail: wait for them.
				heap.Push(&h.queue, e)
				return Lease{}, false
			}
			l.e = e
			out.URL, out.Depth, out.Hops, out.Parent = e.msg.URL, e.msg.Depth, e.msg.Hops, e.msg.Parent
			out.Attempt, out.MaxAttempts = e.attempt+1, a.cfg.MaxAttempts
			break
		}
	}
	h.inflight++
	h.next = now.Add(h.delay)
	a.leases[l.id] = l
	s.leases[l.id] = struct{}{}
	a.inflight.Add(1)
	return out, true
}

func pathOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "/"
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// endLease removes a lease; the caller decides what becomes of its URL.
func (a *campaignActor) endLease(l *lease, now time.Time) {
	delete(a.leases, l.id)
	delete(l.s.leases, l.id)
	l.h.inflight--
	a.inflight.Add(-1)
}

// returnLease puts a lost lease's URL back (or dead-letters a poison URL).
func (a *campaignActor) returnLease(l *lease, why string, now time.Time) {
	a.endLease(l, now)
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
		a.deadLetter(l.e, ReasonLost, fmt.Sprintf("lease lost %d times (last: %s)", l.e.lost, why))
		a.place(l.h, now)
		return
	}
	heap.Push(&l.h.queue, l.e)
	a.place(l.h, now)
}

func (a *campaignActor) expireLeases() {
	now := time.Now()
	for _, l := range a.leases {
		if now.After(l.deadline) {
			a.log.Warn("lease expired", "url", l.urlOf(), "session", l.s.client)
			a.returnLease(l, "deadline passed without a report", now)
		}
	}
}

func (l *lease) urlOf() string {
	if l.e == nil {
		return l.h.root + "/robots.txt"
	}
	return l.e.msg.URL
}

// --- sessions ----------------------------------------------------------

func (a *campaignActor) addSession(s *session) error {
	if a.stopping {
		return fmt.Errorf("campaign %s is closing on this scheduler", a.cfg.ID)
	}
	if err := a.subscribe(); err != nil {
		return err
	}
	a.sessions[s] = struct{}{}
	a.nsessions.Store(int64(len(a.sessions)))
	return nil
}

func (a *campaignActor) removeSession(s *session) {
	if _, ok := a.sessions[s]; !ok {
		return
	}
	delete(a.sessions, s)
	a.nsessions.Store(int64(len(a.sessions)))
	now := time.Now()
	for id := range s.leases {
		if l := a.leases[id]; l != nil {
			a.returnLease(l, "session closed", now)
		}
	}
}

func (a *campaignActor) renew(s *session) {
	deadline := time.Now().Add(a.srv.cfg.LeaseTimeout)
	for id := range s.leases {
		if l := a.leases[id]; l != nil && l.start.Add(a.srv.cfg.MaxLease).After(deadline) {
			l.deadline = deadline
		}
	}
}

// --- outcomes ----------------------------------------------------------

// onOutcomes handles a batch of outcomes from s. State changes happen here;
// the I/O (publishing links with confirms, marking done, acking) runs in a
// goroutine, so the loop never waits on RabbitMQ.
func (a *campaignActor) onOutcomes(s *session, items []Outcome) {
	now := time.Now()
	var rec []recordJob
	for _, o := range items {
		l := a.leases[o.LeaseID]
		if l == nil || l.s != s {
			continue // expired and re-leased: the newer lease's outcome counts
		}
		a.endLease(l, now)
		h := l.h
		if l.e == nil {
			// robots.txt may set a Crawl-delay: apply it before spacing.
			a.onRobots(h, o, now)
		}
		// Space request starts: the request started no later than now-Took
		// (Took is measured from after the request), whatever the lease's
		// transit; an outcome without Took counts from now.
		if start := now.Add(-o.Took); start.Add(h.delay).After(h.next) {
			h.next = start.Add(h.delay)
		}
		if l.e == nil {
			a.trimHost(h, now)
			a.place(h, now)
			continue
		}
		e := l.e
		if a.held[e.key] != e {
			a.place(h, now)
			continue // the delivery is void (channel lost); it came again or will
		}
		origin := originOf(e.msg.URL)
		if o.Status > 0 {
			h.answered(origin)
		}
		if o.HostDown {
			// Counts against the host's origin, and as an attempt of the
			// URL, so that a URL that always fails on a host that works
			// ends too.
			a.hostDown(h, origin, o.Reason, o.Error, now)
		}
		switch {
		case o.Released:
			heap.Push(&h.queue, e)
		case o.HostDown && !o.Stored:
			e.attempt++
			switch d := h.downFor(origin); {
			case d != nil:
				delete(a.held, e.key)
				a.deadLetter(e, d.why, d.message(h, origin))
			case e.attempt >= a.cfg.MaxAttempts:
				delete(a.held, e.key)
				a.deadLetter(e, o.Reason, fmt.Sprintf("gave up after %d attempts: %s", e.attempt, o.Error))
			default:
				a.retried.Add(1)
				heap.Push(&h.queue, e)
			}
		case o.SinkFailed:
			// A sink refused the page (the fetcher retried it for a while):
			// put aside without counting a fetch attempt, at most
			// MaxAttempts times, then dead-lettered with the sink's reason.
			e.sinkFails++
			delete(a.held, e.key)
			if e.sinkFails >= a.cfg.MaxAttempts {
				a.deadLetter(e, ReasonSink, fmt.Sprintf("no sink stored the page after %d tries: %s", e.sinkFails, o.Error))
				break
			}
			a.park(e, max(o.RetryAfter, retryBackoff(0)), e.attempt, e.lost, "", "")
		case o.Backoff || o.Retry:
			if o.Backoff {
				wait := max(o.RetryAfter, 2*h.delay, time.Second)
				h.next = maxTime(h.next, now.Add(wait))
			}
			attempt := e.attempt + 1
			a.retried.Add(1)
			wait := max(o.RetryAfter, retryBackoff(attempt))
			delete(a.held, e.key)
			reason := o.Reason
			if reason == "" {
				reason = statusReason(o.Status)
			}
			a.park(e, wait, attempt, e.lost, reason, o.Error)
		default:
			h.fetched++
			j := recordJob{e: e, links: o.Links}
			if o.Error != "" && o.Status == 0 {
				a.failed.Add(1)
				j.fail = &FailureRecord{Reason: orOther(o.Reason), LastError: o.Error}
			} else {
				a.fetched.Add(1)
				if o.Status >= 400 {
					j.fail = &FailureRecord{Reason: statusReason(o.Status), LastError: o.Error}
				}
			}
			if j.fail != nil {
				j.fail.URL, j.fail.Attempts, j.fail.First, j.fail.Last = e.msg.URL, e.attempt+1, now, now
				a.countReason(j.fail.Reason)
			}
			rec = append(rec, j)
		}
		a.place(h, now)
		if wait := h.next.Sub(now); wait > holdWindow && len(h.queue) > 0 {
			a.parkHost(h, wait)
		}
	}
	if len(rec) > 0 {
		a.pending.Add(1)
		if !a.spawn(func(ctx context.Context) { a.record(ctx, rec) }) {
			a.pending.Add(-1)
		}
	}
}

// statusReason is the failure reason of an HTTP status (4xx, 5xx), or
// ReasonOther.
func statusReason(status int) string {
	switch {
	case status >= 400 && status < 500:
		return "4xx"
	case status >= 500 && status < 600:
		return "5xx"
	}
	return ReasonOther
}

func orOther(reason string) string {
	if reason == "" {
		return ReasonOther
	}
	return reason
}

// retryBackoff is the wait before attempt n+1.
func retryBackoff(attempt int) time.Duration {
	d := 5 * time.Second
	for range attempt {
		d *= 4
	}
	return min(d, 10*time.Minute)
}

func (a *campaignActor) onRobots(h *host, o Outcome, now time.Time) {
	var r *fetch.Robots
	if o.Robots == nil {
		r = fetch.ParseRobots(0, nil, errors.New(o.Error))
	} else {
		var ferr error
		if o.Robots.Error != "" {
			ferr = errors.New(o.Robots.Error)
		}
		r = fetch.ParseRobots(o.Robots.Status, o.Robots.Body, ferr)
	}
	h.robots = r
	h.robotsState = robotsReady
	if r.Unreachable {
		// RFC 9309: everything disallowed while robots.txt is unreachable
		// (5xx, 429, network); it counts against the host like any
		// connection failure, and the host fails after HostRetries more.
		reason, why := o.Reason, o.Error
		if o.Robots != nil && o.Robots.Status > 0 {
			reason, why = ReasonRobots, fmt.Sprintf("robots.txt answered %d", o.Robots.Status)
		} else if o.Robots != nil && o.Robots.Error != "" {
			why = o.Robots.Error
		}
		if a.hostDown(h, "", reason, why, now) {
			return
		}
		h.robotsAt = h.next
		if wait := h.robotsAt.Sub(now); wait > holdWindow {
			a.parkHost(h, wait)
		}
		return
	}
	h.answered("")
	h.robotsAt = now.Add(robotsTTL)
	if cd := r.CrawlDelay(); cd > h.delay {
		h.delay = min(cd, 10*time.Minute)
	}
	if a.cfg.Sitemaps && !h.sitemaps {
		h.sitemaps = true
		a.seedSitemaps(h, r.Sitemaps())
	}
}

// seedSitemaps queues the in-scope sitemaps a host's robots.txt names, as
// links of depth 0; the fetcher reads their <loc> URLs as links.
func (a *campaignActor) seedSitemaps(h *host, urls []string) {
	var links []Link
	for _, raw := range urls {
		s, err := fetch.Normalize(raw, nil, a.cfg.DropParams)
		if err != nil {
			continue
		}
		if u, err := url.Parse(s); err == nil && a.scope != nil {
			if ok, _ := a.scope.Allow(u, 0, nil); ok {
				links = append(links, Link{URL: s})
			}
		}
	}
	if len(links) == 0 {
		return
	}
	robots := &entry{msg: urlMsg{URL: h.root + "/robots.txt", Depth: -1}}
	a.pending.Add(1)
	ok := a.spawn(func(ctx context.Context) {
		defer a.pending.Add(-1)
		// robots.txt is no delivery whose ack could wait for these links:
		// the publish is retried here, a bounded number of times, and the
		// pending count keeps the campaign from draining meanwhile. After
		// the last try the host's robots.txt is fetched again, and its
		// sitemaps queued again with it.
		wait := time.Second
		for try := 1; ; try++ {
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := a.publishLinks(pctx, []recordJob{{e: robots, links: links}})
			cancel()
			if err == nil {
				return
			}
			if try == sitemapTries || ctx.Err() != nil {
				a.log.Error("queueing sitemaps failed; robots.txt will be fetched again", "host", h.name, "tries", try, "err", err)
				a.post(func() {
					h.sitemaps = false
					if h.robotsState == robotsReady {
						h.robotsState = robotsUnknown
					}
				})
				return
			}
			a.log.Warn("queueing sitemaps failed; retrying", "host", h.name, "err", err, "in", wait)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
		}
	})
	if !ok {
		a.pending.Add(-1)
		h.sitemaps = false
	}
}

// sitemapTries bounds the publishes of one robots.txt's sitemaps.
const sitemapTries = 8

// trimHost parks the URLs h holds beyond holdWindow of its current pace
// (a robots.txt Crawl-delay can turn a few seconds of backlog into
// minutes): held, they would fill their shard's prefetch window and starve
// the other hosts of the shard.
func (a *campaignActor) trimHost(h *host, now time.Time) {
	conc := max(h.conc, 1)
	keep := conc
	if h.delay > 0 {
		keep = max(conc, int(holdWindow/h.delay)*conc)
	}
	if len(h.queue) <= keep {
		return
	}
	var kept entryHeap
	for i := 0; len(h.queue) > 0; i++ {
		e := heap.Pop(&h.queue).(*entry)
		if i < keep {
			kept = append(kept, e)
			continue
		}
		delete(a.held, e.key)
		a.park(e, time.Duration(i/conc)*h.delay, e.attempt, e.lost, "", "")
	}
	heap.Init(&kept)
	h.queue = kept
}

// parkHost parks every URL h holds: its next request is too far away.
func (a *campaignActor) parkHost(h *host, wait time.Duration) {
	for _, e := range h.queue {
		delete(a.held, e.key)
		a.park(e, wait, e.attempt, e.lost, "", "")
	}
	h.queue = nil
	a.place(h, time.Now())
}

type recordJob struct {
	e     *entry
	links []Link
	fail  *FailureRecord // a page with an error status, or a failure stored as a page
}

// record publishes the discovered links not yet queued (confirmed), marks
// them queued, marks the URLs done, then acks their deliveries: the order
// the invariant needs. On failure the deliveries are nacked back to their
// queues (fetched again later, never lost).
//
// The entries leave held on the actor's goroutine before anything is acked
// or nacked: a redelivery that comes after a nack must be taken as the URL
// again, not as a duplicate of an entry still held, and one that comes
// after an ack finds the URL marked done.
func (a *campaignActor) record(ctx context.Context, jobs []recordJob) {
	defer a.pending.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err := a.publishLinks(ctx, jobs)
	if err == nil {
		keys := make([]Key, len(jobs))
		for i, j := range jobs {
			keys[i] = j.e.key
		}
		var fails []FailureRecord
		for _, j := range jobs {
			if j.fail != nil {
				fails = append(fails, *j.fail)
			}
		}
		if err = a.recordFailures(fails); err == nil {
			if err = a.srv.store.MarkDone(a.cfg.ID, keys); err != nil {
				err = fmt.Errorf("seen store: %w", err)
			}
		}
	}
	a.call(func() {
		for _, j := range jobs {
			if a.held[j.e.key] == j.e {
				delete(a.held, j.e.key)
			}
		}
	})
	if err != nil {
		a.recordFailed.Add(int64(len(jobs)))
		a.log.Error("recording outcome failed; the URL goes back to its queue", "urls", len(jobs), "url", jobs[0].e.msg.URL, "err", err)
	}
	for _, j := range jobs {
		if err != nil {
			a.nackEntry(j.e)
		} else {
			a.ackEntry(j.e)
		}
	}
}

// linkPublish is one record's publish of a link, which other records that
// found the same link wait for.
type linkPublish struct {
	done chan struct{}
	err  error // set before done is closed
}

// publishLinks publishes the jobs' links that are not queued yet and
// returns once every one of them is confirmed and marked queued: by this
// call, or by another record's publish of the same link that it waited for
// (and did again itself when that one failed).
func (a *campaignActor) publishLinks(ctx context.Context, jobs []recordJob) error {
	var keys []Key
	var msgs []outMsg
	seen := map[Key]bool{}
	for _, j := range jobs {
		for _, l := range j.links {
			k := KeyOf(l.URL)
			if seen[k] {
				continue
			}
			seen[k] = true
			host, err := fetch.HostKey(l.URL)
			if err != nil {
				continue
			}
			keys = append(keys, k)
			depth := j.e.msg.Depth + 1
			if l.Hops > 0 {
				depth = j.e.msg.Depth // a redirect does not go deeper
			}
			m := urlMsg{URL: l.URL, Depth: depth, Hops: l.Hops, Parent: j.e.msg.URL, Score: l.Score}
			prio := a.policy.Priority(Item{URL: l.URL, Host: host, Depth: depth, Score: l.Score})
			msgs = append(msgs, outMsg{key: a.topo.Shard(ShardOf(host)), msg: encodeMsg(m, priorityLevel(prio), nil)})
		}
	}
	if len(keys) == 0 {
		return nil
	}
	queued, err := a.srv.store.Queued(a.cfg.ID, keys)
	if err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	var mine []int
	var mineW []*linkPublish
	type other struct {
		i int
		w *linkPublish
	}
	var others []other
	a.publishingMu.Lock()
	for i := range msgs {
		if queued[i] {
			continue
		}
		if w := a.publishing[keys[i]]; w != nil {
			others = append(others, other{i, w})
			continue
		}
		w := &linkPublish{done: make(chan struct{})}
		a.publishing[keys[i]] = w
		mine = append(mine, i)
		mineW = append(mineW, w)
	}
	a.publishingMu.Unlock()
	err = a.publishSome(ctx, keys, msgs, mine)
	a.publishingMu.Lock()
	for n, i := range mine {
		delete(a.publishing, keys[i])
		mineW[n].err = err
		close(mineW[n].done)
	}
	a.publishingMu.Unlock()
	if err != nil {
		return err
	}
	var again []int
	for _, o := range others {
		select {
		case <-o.w.done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for a link's publish: %w", ctx.Err())
		}
		if o.w.err != nil {
			again = append(again, o.i)
		}
	}
	return a.publishSome(ctx, keys, msgs, again)
}

// publishSome publishes msgs[i] for each i in idx, confirmed, and marks
// their keys queued.
func (a *campaignActor) publishSome(ctx context.Context, keys []Key, msgs []outMsg, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	out := make([]outMsg, len(idx))
	ks := make([]Key, len(idx))
	for n, i := range idx {
		out[n], ks[n] = msgs[i], keys[i]
	}
	if err := a.srv.pub.publish(ctx, out); err != nil {
		return err
	}
	a.published.Add(int64(len(out)))
	a.discovered.Add(int64(len(out)))
	if err := a.srv.store.MarkQueued(a.cfg.ID, ks); err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	return nil
}

// park re-publishes e's URL to the parking queue that fits wait
// (confirmed), then acks its delivery.
//
// A retry (reason given) that reaches MaxAttempts is dead-lettered
// instead, with its reason.
func (a *campaignActor) park(e *entry, wait time.Duration, attempt, lost int, reason, why string) {
	if attempt >= a.cfg.MaxAttempts && reason != "" {
		a.deadLetter(e, reason, fmt.Sprintf("gave up after %d attempts: %s", attempt, why))
		return
	}
	i := parkFor(wait)
	hdr := amqp.Table{hdrAttempt: int32(attempt), hdrLost: int32(lost), hdrSinkFails: int32(e.sinkFails)}
	if why != "" {
		hdr[hdrError] = why
	}
	// A parked URL comes back at the lowest priority: a slow host's
	// backlog must not come back ahead of the other hosts of its shard.
	msg := outMsg{exchange: a.topo.Park(i), key: a.topo.Shard(e.shard), msg: encodeMsg(e.msg, 0, hdr)}
	a.repost(e, msg, nil)
}

// deadLetter moves a URL to the dead-letter queue with its reason and
// error, and records it as a failure (for `starter failures`) before its
// delivery is acked.
func (a *campaignActor) deadLetter(e *entry, reason, why string) {
	reason = orOther(reason)
	a.log.Warn("dead-lettering", "url", e.msg.URL, "reason", reason, "error", why)
	a.deadLtrd.Add(1)
	a.countReason(reason)
	hdr := amqp.Table{hdrError: why, hdrReason: reason, hdrAttempt: int32(e.attempt)}
	pub := amqp.Publishing{ContentType: e.d.ContentType, Body: e.d.Body, Headers: hdr}
	if e.msg.URL != "" {
		pub = encodeMsg(e.msg, 0, hdr)
	}
	now := time.Now()
	var fail *FailureRecord
	if e.msg.URL != "" {
		fail = &FailureRecord{URL: e.msg.URL, Reason: reason, Attempts: e.attempt, LastError: why, First: now, Last: now}
	}
	a.repost(e, outMsg{key: a.topo.Dead(), msg: pub}, fail)
}

// repost publishes msg (confirmed) and then acks e's delivery, in a
// goroutine; if the publish fails, the delivery goes back to its queue.
func (a *campaignActor) repost(e *entry, msg outMsg, fail *FailureRecord) {
	a.pending.Add(1)
	ok := a.spawn(func(ctx context.Context) {
		defer a.pending.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := a.srv.pub.publish(ctx, []outMsg{msg})
		if err == nil && fail != nil {
			err = a.recordFailures([]FailureRecord{*fail})
		}
		if err != nil {
			a.recordFailed.Add(1)
			a.log.Error("re-publish failed; the URL goes back to its queue", "url", e.msg.URL, "err", err)
			a.nackEntry(e)
			return
		}
		a.published.Add(1)
		a.ackEntry(e)
	})
	if !ok {
		a.pending.Add(-1) // stopping: the delivery goes back with the channel
	}
}

// dropRecorded settles a URL dropped on purpose (robots.txt disallows it):
// its failure is recorded, then its delivery acked; if the record fails,
// the delivery goes back and the URL is dropped again later.
func (a *campaignActor) dropRecorded(e *entry, reason, why string) {
	a.countReason(reason)
	now := time.Now()
	fail := FailureRecord{URL: e.msg.URL, Reason: reason, Attempts: e.attempt, LastError: why, First: now, Last: now}
	if _, keeps := a.srv.store.(FailureStore); !keeps {
		a.ackEntry(e)
		return
	}
	a.pending.Add(1)
	ok := a.spawn(func(context.Context) {
		defer a.pending.Add(-1)
		if err := a.recordFailures([]FailureRecord{fail}); err != nil {
			a.recordFailed.Add(1)
			a.log.Error("recording a dropped URL failed; it goes back to its queue", "url", e.msg.URL, "err", err)
			a.nackEntry(e)
			return
		}
		a.ackEntry(e)
	})
	if !ok {
		a.pending.Add(-1)
	}
}

// ackEntry acks e's delivery (its outcome is recorded, or it was dropped
// on purpose).
func (a *campaignActor) ackEntry(e *entry) {
	if err := e.d.Ack(false); err != nil {
		// Its channel is gone: RabbitMQ requeued it, and the redelivery is
		// seen as done (or fetched again).
		a.log.Warn("ack failed; the URL comes back", "url", e.msg.URL, "err", err)
	}
	a.settle(e)
}

// nackEntry returns e's delivery to its queue.
func (a *campaignActor) nackEntry(e *entry) {
	if err := e.d.Nack(false, true); err != nil {
		a.log.Warn("nack failed; the channel is gone, so RabbitMQ requeued the URL", "url", e.msg.URL, "err", err)
	}
	a.settle(e)
}

// ack acks a delivery that never became an entry.
func (a *campaignActor) ack(d amqp.Delivery) {
	if err := d.Ack(false); err != nil {
		a.log.Warn("ack of a duplicate failed; it comes back", "err", err)
	}
	a.unacked.Add(-1)
	a.acked.Add(1)
}

// settle counts e's delivery as settled, once, whoever gets there first.
func (a *campaignActor) settle(e *entry) {
	if e.settled.CompareAndSwap(false, true) {
		a.unacked.Add(-1)
		a.acked.Add(1)
	}
}

// --- stats and close ---------------------------------------------------

func (a *campaignActor) stats() Stats {
	return Stats{
		Campaign:     a.cfg.ID,
		Held:         a.unacked.Load(),
		InFlight:     a.inflight.Load(),
		Pending:      a.pending.Load(),
		Fetched:      a.fetched.Load(),
		Failed:       a.failed.Load(),
		Retried:      a.retried.Load(),
		Disallowed:   a.disallowed.Load(),
		Duplicates:   a.duplicates.Load(),
		DeadLettered: a.deadLtrd.Load(),
		Skipped:      a.skipped.Load(),
		Discovered:   a.discovered.Load(),
		Published:    a.published.Load(),
		Acked:        a.acked.Load(),
		Hosts:        a.nhosts.Load(),
		Sessions:     a.nsessions.Load(),
		CapReached:   a.capped.Load(),
		RecordFailed: a.recordFailed.Load(),
		HostsDown:    a.hostsDown.Load(),
		Consuming:    a.isConsuming.Load(),
		FailedBy:     a.reasonCounts(),
		ConsumeError: a.consumeErrText(),
	}
}

func (a *campaignActor) consumeErrText() string {
	if p := a.consumeErr.Load(); p != nil {
		return *p
	}
	return ""
}

// stop ends the actor: its sessions close and their leases go back, the
// goroutines recording outcomes finish (within grace, then they are
// cancelled, which nacks what they held), and then its deliveries go back
// to their queues. After stop nothing of the actor writes to RabbitMQ or
// to the seen store.
func (a *campaignActor) stop(grace time.Duration) {
	a.call(func() {
		a.stopping = true
		for s := range a.sessions {
			a.removeSession(s)
			s.close()
		}
	})
	if !waitGroupTimeout(&a.wg, grace) {
		a.log.Warn("outcomes still being recorded at close; cancelling them (their URLs go back to their queues)", "after", grace)
		a.cancel()
		if !waitGroupTimeout(&a.wg, time.Minute) {
			a.log.Error("outcome recording did not end a minute after its cancel")
		}
	}
	a.call(func() {
		a.release()
		a.stopped = true
		close(a.done)
	})
	a.cancel()
}

// waitGroupTimeout waits for wg for at most d; false when it timed out.
func waitGroupTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// Settling a delivery: parked for a later try or dead-lettered with its
// reason (re-published, confirmed, before the ack), sent back to its
// queue, or acked.

package frontier

import (
	"container/heap"
	"context"
	"fmt"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/failure"
)

// settler is the campaign's actor seen from settling its URLs. On the
// actor's goroutine it parks them (park, flushParks, and what a host
// holds beyond its pace: trimHost, parkHost), dead-letters, drops or
// re-publishes them (deadLetter, deadMessage, dropRecorded, repost), puts
// a leased URL that comes back in its host's queue (requeue) and fails the
// origins of a host that does not answer (hostDown, failOrigin);
// settleEntry, ackEntry, sendBack, nackEntry and countDead run on the
// record and repost goroutines too. recordFailures stays campaignActor's:
// the links' record calls it there.
type settler struct{ *campaignActor }

// settler returns a's settler.
func (a *campaignActor) settler() settler { return settler{a} }

// park re-publishes e's URL to the parking queue that fits wait
// (confirmed), then acks its delivery.
//
// A retry (reason given) that reaches MaxAttempts is dead-lettered
// instead, with its reason.
func (a settler) park(e *entry, wait time.Duration, attempt, lost int, reason, why string) {
	if attempt >= a.cfg.MaxAttempts && reason != "" {
		a.deadLetter(e, reason, fmt.Sprintf("gave up after %d attempts: %s", attempt, why))
		return
	}
	i := parkFor(wait)
	if reason == "" && why == "" {
		// A plain park (a host too far behind): parked with the others of
		// this turn of the loop, several URLs to a message (flushParks).
		a.parked = append(a.parked, parkReq{e: e, queue: i, attempt: attempt, lost: lost})
		return
	}
	hdr := amqp.Table{hdrAttempt: int32(attempt), hdrLost: int32(lost), hdrSinkFails: int32(e.sinkFails)}
	if why != "" {
		hdr[hdrError] = why
	}
	a.parkHeaders(hdr, i, time.Now())
	// A parked URL comes back at the lowest priority: a slow host's
	// backlog must not come back ahead of the other hosts of its shard.
	msg := outMsg{exchange: a.topo.Park(i), key: a.topo.Shard(e.shard), msg: encodeMsg(e.msg, 0, hdr)}
	a.repost(e, msg, nil)
}

// parkReq is a plain park waiting for flushParks.
type parkReq struct {
	e             *entry
	queue         int // parkFor's index
	attempt, lost int
}

// flushParks publishes the plain parks of the loop's last turn: those
// that go to one park queue, for one shard, with the same counts, share a
// message of up to the scheduler's Batch URLs: a slow host's backlog is
// parked in a few messages rather than one per URL (each a publish, a
// confirm, and later a delivery and an ack). Each URL's delivery is acked once its message is confirmed, or nacked
// back when the publish fails; a parked message comes back with its
// counts, which apply to each of its URLs (onDelivery).
func (a settler) flushParks() {
	if len(a.parked) == 0 {
		return
	}
	type group struct{ queue, shard, attempt, lost, sinkFails int }
	var order []group
	by := map[group][]*entry{}
	for _, p := range a.parked {
		g := group{p.queue, p.e.shard, p.attempt, p.lost, p.e.sinkFails}
		if _, ok := by[g]; !ok {
			order = append(order, g)
		}
		by[g] = append(by[g], p.e)
	}
	clear(a.parked)
	a.parked = a.parked[:0]
	size := max(a.srv.cfg.Batch, 1)
	now := time.Now()
	for _, g := range order {
		hdr := func() amqp.Table {
			return a.parkHeaders(amqp.Table{hdrAttempt: int32(g.attempt), hdrLost: int32(g.lost), hdrSinkFails: int32(g.sinkFails)}, g.queue, now)
		}
		for es := by[g]; len(es) > 0; {
			n := min(len(es), size)
			ms := make([]urlMsg, n)
			for i, e := range es[:n] {
				ms[i] = e.msg
			}
			// A parked URL comes back at the lowest priority: a slow
			// host's backlog must not come back ahead of the other hosts
			// of its shard.
			msg := outMsg{exchange: a.topo.Park(g.queue), key: a.topo.Shard(g.shard), msg: encodeParked(ms, hdr())}
			a.repostAll(es[:n], msg, nil, nil)
			es = es[n:]
		}
	}
}

// deadLetter moves a URL to the dead-letter queue with its reason and
// error, and records it as a failure (for `starter failures`) before its
// delivery is acked.
func (a settler) deadLetter(e *entry, reason, why string) {
	msg, fail := a.deadMessage(e, reason, why)
	reason = orOther(reason)
	m, attempts, unread := e.msg, e.attempt, e.unread
	a.repostAll([]*entry{e}, msg, fail, func() {
		a.countDead(reason)
		if !unread {
			a.deadLog.write(crawllog.OutcomeDeadLettered, m, attempts, reason, why)
		}
	})
}

// countDead counts a URL dead-lettered with reason, once its message is
// in the dead-letter queue: a dead-lettering that fails is not counted
// (the URL comes back, and may be dead-lettered again).
func (a settler) countDead(reason string) {
	a.deadLtrd.Add(1)
	a.srv.m().deadLetter(a.cfg.ID, reason)
	a.countReason(reason)
}

// deadMessage is e's message for the dead-letter queue with reason and
// why, and its failure record (nil for a URL that could not be read).
func (a settler) deadMessage(e *entry, reason, why string) (outMsg, *failure.Record) {
	reason = orOther(reason)
	a.log.Warn("dead-lettering", "url", e.msg.URL, "reason", reason, "err", why)
	hdr := amqp.Table{hdrError: why, hdrReason: reason, hdrAttempt: int32(e.attempt)}
	pub := encodeMsg(e.msg, 0, hdr)
	if e.unread {
		if n, ok := e.dl.raw.Headers[hdrBatch]; ok {
			hdr[hdrBatch] = n
		}
		pub = amqp.Publishing{ContentType: e.dl.raw.ContentType, Body: e.dl.raw.Body, Headers: hdr}
	}
	now := time.Now()
	var fail *failure.Record
	if e.msg.URL != "" {
		fail = &failure.Record{URL: e.msg.URL, Reason: reason, Attempts: e.attempt, LastError: why, First: now, Last: now}
	}
	return outMsg{key: a.topo.Dead(), msg: pub}, fail
}

// repost publishes msg (confirmed) and then acks e's delivery, in a
// goroutine; if the publish fails, the delivery goes back to its queue.
func (a settler) repost(e *entry, msg outMsg, fail *failure.Record) {
	a.repostAll([]*entry{e}, msg, fail, nil)
}

// repostAll is repost for the URLs of one message (fail, when set, is
// recorded after the publish): each is acked once the message is
// confirmed (after done, when set, is called), or all go back to their
// queues.
func (a settler) repostAll(es []*entry, msg outMsg, fail *failure.Record, done func()) {
	a.pending.Add(1)
	ok := a.spawn(func(ctx context.Context) {
		defer a.pending.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := a.srv.pub.publish(ctx, []outMsg{msg})
		if err != nil {
			a.parks.settle(msg.msg.Headers) // a park not published is not owed
		}
		if err == nil && fail != nil {
			err = a.recordFailures([]failure.Record{*fail})
		}
		if err != nil {
			a.recordFailed.Add(int64(len(es)))
			a.log.Error("re-publish failed; the URLs go back to their queue", "urls", len(es), "url", es[0].msg.URL, "err", err)
			for _, e := range es {
				a.nackEntry(e)
			}
			return
		}
		a.published.Add(int64(len(es)))
		a.messages.Add(1)
		if done != nil {
			done()
		}
		for _, e := range es {
			e.dl.moved.Store(true)
			a.ackEntry(e)
		}
	})
	if !ok {
		a.pending.Add(-1) // stopping: the deliveries go back with the channel
	}
}

// dropRecorded settles a URL dropped on purpose (robots.txt disallows it):
// its failure is recorded, then its delivery acked; if the record fails,
// the delivery goes back and the URL is dropped again later.
func (a settler) dropRecorded(e *entry, reason, why string) {
	a.countReason(reason)
	now := time.Now()
	fail := failure.Record{URL: e.msg.URL, Reason: reason, Attempts: e.attempt, LastError: why, First: now, Last: now}
	m := e.msg
	a.pending.Add(1)
	ok := a.spawn(func(context.Context) {
		defer a.pending.Add(-1)
		if err := a.recordFailures([]failure.Record{fail}); err != nil {
			a.recordFailed.Add(1)
			a.log.Error("recording a dropped URL failed; it goes back to its queue", "url", m.URL, "err", err)
			a.nackEntry(e)
			return
		}
		a.deadLog.write(crawllog.OutcomeDropped, m, fail.Attempts, reason, why)
		a.ackEntry(e)
	})
	if !ok {
		a.pending.Add(-1)
	}
}

// ackEntry settles e: its outcome is recorded, it was re-published
// elsewhere (confirmed), or it was dropped on purpose.
func (a settler) ackEntry(e *entry) { a.settleEntry(e, false) }

// nackEntry settles e as not done: its message goes back to its queue
// (whole, with the other URLs of its batch, which are then found done).
func (a settler) nackEntry(e *entry) { a.settleEntry(e, true) }

// voidEntry settles e whose channel is gone (RabbitMQ requeued its message).
func (a settler) voidEntry(e *entry) {
	e.dl.void.Store(true)
	a.settleEntry(e, false)
}

// sendBack settles a message some of whose URLs moved to another queue
// (parked, dead-lettered: confirmed there) while others asked to go back:
// nacked whole, it would bring the moved ones back too, a parked URL twice
// and a dead-lettered one to be fetched again with its attempts reset. The
// URLs that asked to go back are published to their shard queue alone
// (confirmed, with their counts), then the message is acked. If that
// publish fails, the message is nacked back whole after all: a URL twice
// is better than a URL lost.
func (a settler) sendBack(dl *delivery) {
	dl.backMu.Lock()
	back := dl.back
	dl.back = nil
	dl.backMu.Unlock()
	msgs := make([]outMsg, 0, len(back))
	for _, e := range back {
		hdr := amqp.Table{hdrAttempt: int32(e.attempt), hdrLost: int32(e.lost), hdrSinkFails: int32(e.sinkFails)}
		msgs = append(msgs, outMsg{key: a.topo.Shard(e.shard), msg: encodeMsg(e.msg, priorityLevel(e.prio), hdr)})
	}
	settled := func() {
		a.unacked.Add(-1)
		a.acked.Add(1)
	}
	a.pending.Add(1)
	ok := a.spawn(func(ctx context.Context) {
		defer a.pending.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var err error
		if perr := a.srv.pub.publish(ctx, msgs); perr != nil {
			a.log.Error("sending back the URLs of a message failed; it goes back whole", "urls", len(back), "url", back[0].msg.URL, "err", perr)
			err = dl.Nack(false, true)
		} else {
			a.published.Add(int64(len(msgs)))
			a.messages.Add(int64(len(msgs)))
			err = dl.Ack(false)
		}
		if err != nil {
			a.ackFailed.Add(1)
			a.log.Warn("ack failed; the message comes back", "url", back[0].msg.URL, "err", err)
		}
		settled()
	})
	if !ok {
		// Stopping: the channel closes, and RabbitMQ requeues the message.
		a.pending.Add(-1)
		settled()
	}
}

// settleEntry counts e settled, once, whoever gets there first; the last
// URL of a message acks it, or nacks it back to its queue when one of its
// URLs asked to (requeue). Stats' Held counts URLs: the message's last
// count goes only after its ack, so none held means none unacked.
func (a settler) settleEntry(e *entry, requeue bool) {
	if !e.settled.CompareAndSwap(false, true) {
		return
	}
	dl := e.dl
	if requeue {
		dl.backMu.Lock()
		dl.back = append(dl.back, e)
		dl.backMu.Unlock()
		dl.requeue.Store(true)
	}
	if dl.left.Add(-1) > 0 {
		a.unacked.Add(-1)
		return
	}
	if !dl.void.Load() && dl.requeue.Load() && dl.moved.Load() {
		a.sendBack(dl)
		return
	}
	if !dl.void.Load() {
		var err error
		if dl.requeue.Load() {
			err = dl.Nack(false, true)
		} else {
			err = dl.Ack(false)
		}
		if err != nil {
			// Its channel is gone: RabbitMQ requeued it, and the redelivery
			// is seen as done (or fetched again).
			a.ackFailed.Add(1)
			a.log.Warn("ack failed; the message comes back", "url", e.msg.URL, "err", err)
		}
	}
	a.unacked.Add(-1)
	a.acked.Add(1)
}

// trimHost parks the URLs h holds beyond holdWindow of its current pace
// (a robots.txt Crawl-delay can turn a few seconds of backlog into
// minutes): held, they would fill their shard's prefetch window and starve
// the other hosts of the shard.
func (a settler) trimHost(h *host, now time.Time) {
	conc := max(h.conc, 1)
	keep := conc
	if h.spacing() > 0 {
		// Starts are a delay apart whatever the concurrency.
		keep = max(conc, int(holdWindow/h.spacing()))
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
		a.park(e, time.Duration(i)*h.spacing(), e.attempt, e.lost, "", "")
	}
	heap.Init(&kept)
	h.queue = kept
}

// parkHost parks every URL h holds: its next request is too far away.
func (a settler) parkHost(h *host, wait time.Duration) {
	for _, e := range h.queue {
		delete(a.held, e.key)
		a.park(e, wait, e.attempt, e.lost, "", "")
	}
	h.queue = nil
	a.leaser().place(h, time.Now())
}

// Moving parked URLs back: while a scheduler consumes a campaign's shards,
// its park mover consumes the campaign's park queues too. It holds each
// park message until the wait it was parked for ends (header hdrDue),
// publishes it back to its shard queue, through the default exchange by
// the routing key it was parked with (the shard queue's name), confirmed,
// and only then acks it. Until then the message is unacked in its park
// queue: a mover that dies, or whose channel closes, gives it back to
// the queue for another mover. RabbitMQ counts it as unacked, not ready,
// so each scheduler counts what its mover holds (Stats.ParkedMoving),
// and the frontier is not idle while any mover holds a message.
//
// A move that RabbitMQ refuses (a quorum shard whose leader does not
// answer: a partition, its heal, an election) is tried again, after 1 s
// doubling to moveRetryMax, for as long as the mover's channel lives: the
// message is held and counted meanwhile, each failure is logged and
// counted (park_move_errors_total), and nothing is handed to a process
// that may forget it. This replaces RabbitMQ's at-least-once dead-
// lettering, which earlier park queues relied on: its dead-letter worker
// can be lost with a leader change after a partition, and then holds the
// messages it took in no queue's count, for good.

package frontier

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// hdrDue carries the time (Unix milliseconds) a park message is due back
// in its shard; a message without it is due at once.
const hdrDue = "x-drover-due"

// parkMovePrefetch is how many messages a mover holds per park queue. A
// park queue is first in, first out, and its messages wait alike, so the
// first held are the first due.
const parkMovePrefetch = 256

// moveBatch is the most messages one move publishes, under one confirm.
const moveBatch = 256

// moveTimeout bounds one try of a move (its publish and confirm).
const moveTimeout = 30 * time.Second

// moveRetryMax is the longest wait before a refused move is tried again,
// and before a mover whose channel broke starts again.
const moveRetryMax = 5 * time.Second

// dueOf is when a park message is due back in its shard.
func dueOf(h amqp.Table) time.Time {
	if ms := headerInt(h, hdrDue); ms > 0 {
		return time.UnixMilli(int64(ms))
	}
	return time.Time{}
}

// parkMoves are a campaign's park mover counts, which the actor reports:
// messages held now, moved back, and moves refused.
type parkMoves struct {
	moving, moved, refused atomic.Int64
}

// parkMover is a running mover: cancel ends it, done closes when it has.
type parkMover struct {
	mq     *rabbit
	pub    *publisher
	topo   Topology
	log    *slog.Logger
	counts *parkMoves
	// published and messages are the actor's counts of confirmed
	// publishes, in URLs and messages: a move is one (for the drain rule).
	published, messages *atomic.Int64
	// holds are the messages held, per park queue (`starter url` and
	// `urls` read them).
	holds []parkHold

	cancel context.CancelFunc
	done   chan struct{}
}

// parkHold is the messages a mover holds of one park queue, until due.
// Its mover's goroutine changes it; a reader locks it.
type parkHold struct {
	mu sync.Mutex
	ds []amqp.Delivery
}

// add holds d.
func (h *parkHold) add(d amqp.Delivery) {
	h.mu.Lock()
	h.ds = append(h.ds, d)
	h.mu.Unlock()
}

// len is the number of messages held.
func (h *parkHold) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ds)
}

// next is when the first message held is due (ok false: none held).
func (h *parkHold) next() (due time.Time, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, d := range h.ds {
		if at := dueOf(d.Headers); i == 0 || at.Before(due) {
			due = at
		}
	}
	return due, len(h.ds) > 0
}

// due returns up to n messages due by now, which stay held until
// moved (a move refused for a while still shows them).
func (h *parkHold) due(now time.Time, n int) []amqp.Delivery {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []amqp.Delivery
	for _, d := range h.ds {
		if len(out) == n {
			break
		}
		if !dueOf(d.Headers).After(now) {
			out = append(out, d)
		}
	}
	return out
}

// remove forgets the messages ds (moved), by delivery tag.
func (h *parkHold) remove(ds []amqp.Delivery) {
	tags := make(map[uint64]bool, len(ds))
	for _, d := range ds {
		tags[d.DeliveryTag] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	kept := h.ds[:0]
	for _, d := range h.ds {
		if !tags[d.DeliveryTag] {
			kept = append(kept, d)
		}
	}
	clear(h.ds[len(kept):])
	h.ds = kept
}

// reset forgets every message held (their channel closed: RabbitMQ has
// them back) and returns how many there were.
func (h *parkHold) reset() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.ds)
	h.ds = nil
	return n
}

// each calls f with each URL held and its message's due time, until f
// returns false.
func (h *parkHold) each(f func(m urlMsg, due time.Time) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, d := range h.ds {
		ms, err := decodeDelivery(d.Body, d.Headers)
		if err != nil {
			continue
		}
		due := dueOf(d.Headers)
		for _, m := range ms {
			if !f(m, due) {
				return
			}
		}
	}
}

// parkedURLs calls f with each URL the mover holds and when it is due,
// until f returns false.
func (m *parkMover) parkedURLs(f func(m urlMsg, due time.Time) bool) {
	for i := range m.holds {
		done := false
		m.holds[i].each(func(u urlMsg, due time.Time) bool {
			done = !f(u, due)
			return !done
		})
		if done {
			return
		}
	}
}

// startMover starts the campaign's park mover, unless one runs. Actor
// goroutine only.
func (a consumer) startMover() {
	if a.mover != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &parkMover{mq: a.srv.mq, pub: a.srv.pub, topo: a.topo, log: a.log, counts: &a.parkMoves,
		published: &a.published, messages: &a.messages, holds: make([]parkHold, len(parkTTLs)),
		cancel: cancel, done: make(chan struct{})}
	a.mover, a.lastMover = m, m
	go func() {
		defer close(m.done)
		m.run(ctx)
	}()
}

// stopMover ends the park mover, if one runs, without waiting: closing
// its channels gives what it held back to the park queues. Actor
// goroutine only.
func (a consumer) stopMover() {
	if a.mover != nil {
		a.mover.cancel()
		a.mover = nil
	}
}

// run moves parked messages until ctx ends: each park queue on a channel
// of its own, so that one that fails (a queue deleted by hand) holds up
// none of the others.
func (m *parkMover) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range parkTTLs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.runQueue(ctx, i)
		}()
	}
	wg.Wait()
}

// runQueue moves park queue i's messages until ctx ends, starting again
// (after 1 s, doubling to moveRetryMax) when its channel breaks.
func (m *parkMover) runQueue(ctx context.Context, i int) {
	var wait time.Duration
	for {
		began := time.Now()
		err := m.consume(ctx, i)
		if ctx.Err() != nil {
			return
		}
		if time.Since(began) > time.Minute {
			wait = 0
		}
		wait = backoff(wait)
		m.log.Warn("moving parked URLs back to their shards stopped; starting again", "queue", m.topo.Park(i), "err", err, "in", wait)
		if !sleepCtx(ctx, wait) {
			return
		}
	}
}

// consume consumes park queue i on a channel of its own and moves its
// messages until the channel breaks or ctx ends; what it held goes back
// to the queue with the channel.
func (m *parkMover) consume(ctx context.Context, i int) error {
	ch, err := m.mq.channel()
	if err != nil {
		return err
	}
	hold := &m.holds[i]
	defer func() {
		ch.Close() // what the mover held goes back to the park queue
		m.counts.moving.Add(-int64(hold.reset()))
	}()
	if err := ch.Qos(parkMovePrefetch, 0, false); err != nil {
		return err
	}
	ds, err := ch.Consume(m.topo.Park(i), "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	return m.moveQueue(ctx, ds, hold)
}

// moveQueue moves one park queue's messages as they come due.
func (m *parkMover) moveQueue(ctx context.Context, ds <-chan amqp.Delivery, hold *parkHold) error {
	take := func(d amqp.Delivery) {
		hold.add(d)
		m.counts.moving.Add(1)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var tick <-chan time.Time
		if due, ok := hold.next(); ok {
			timer.Reset(time.Until(due))
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d, ok := <-ds:
			if !ok {
				return amqp.ErrClosed
			}
			take(d)
			// And what else came with it: messages due at once (back from
			// a mover that died) move together.
			for more := true; more && hold.len() < parkMovePrefetch; {
				select {
				case d, ok := <-ds:
					if !ok {
						return amqp.ErrClosed
					}
					take(d)
				default:
					more = false
				}
			}
		case <-tick:
		}
		move := hold.due(time.Now(), moveBatch)
		if len(move) == 0 {
			continue
		}
		if err := m.move(ctx, move); err != nil {
			return err // not acked: back to the park queue with the channel
		}
		hold.remove(move)
		m.counts.moving.Add(-int64(len(move)))
	}
}

// move publishes ds back to their shards, confirmed, trying again while
// RabbitMQ refuses, then acks them. An error means the channel or ctx
// ended: what was not acked goes back to its park queue, and may come
// back to a shard twice (a duplicate the shard's owner absorbs).
func (m *parkMover) move(ctx context.Context, ds []amqp.Delivery) error {
	msgs := make([]outMsg, len(ds))
	for i, d := range ds {
		msgs[i] = outMsg{key: d.RoutingKey, msg: amqp.Publishing{
			Headers: d.Headers, ContentType: d.ContentType, ContentEncoding: d.ContentEncoding,
			Priority: d.Priority, Body: d.Body,
		}}
	}
	var wait time.Duration
	for {
		pctx, cancel := context.WithTimeout(ctx, moveTimeout)
		err := m.pub.publish(pctx, msgs)
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		m.counts.refused.Add(1)
		wait = backoff(wait)
		m.log.Warn("moving parked URLs back to their shard failed; trying again", "messages", len(ds), "shard", ds[0].RoutingKey, "err", err, "in", wait)
		if !sleepCtx(ctx, wait) {
			return ctx.Err()
		}
	}
	// Counted as published (in URLs) before the acks: the drain rule
	// reads a publish between two readings as activity, so a move seen by
	// neither reading's counts (taken from the mover after one, in the
	// shard only after the other) does not pass for idle.
	urls := 0
	for _, d := range ds {
		urls += max(headerInt(d.Headers, hdrBatch), 1)
	}
	m.published.Add(int64(urls))
	m.messages.Add(int64(len(ds)))
	m.counts.moved.Add(int64(len(ds)))
	for _, d := range ds {
		if err := d.Ack(false); err != nil {
			return err
		}
	}
	return nil
}

// backoff is the wait after wait before trying again: 1 s, doubling to
// moveRetryMax (also consuming's, resubscribeIfDue).
func backoff(wait time.Duration) time.Duration {
	return min(max(2*wait, time.Second), moveRetryMax)
}

// sleepCtx waits d, or until ctx ends (false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

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

	cancel context.CancelFunc
	done   chan struct{}
}

// startMover starts the campaign's park mover, unless one runs. Actor
// goroutine only.
func (a *campaignActor) startMover() {
	if a.mover != nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &parkMover{mq: a.srv.mq, pub: a.srv.pub, topo: a.topo, log: a.log, counts: &a.parkMoves,
		published: &a.published, messages: &a.messages, cancel: cancel, done: make(chan struct{})}
	a.mover, a.lastMover = m, m
	go func() {
		defer close(m.done)
		m.run(ctx)
	}()
}

// stopMover ends the park mover, if one runs, without waiting: closing
// its channels gives what it held back to the park queues. Actor
// goroutine only.
func (a *campaignActor) stopMover() {
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
		wait = min(max(2*wait, time.Second), moveRetryMax)
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
	var held atomic.Int64
	defer func() {
		ch.Close() // what the mover held goes back to the park queue
		m.counts.moving.Add(-held.Load())
	}()
	if err := ch.Qos(parkMovePrefetch, 0, false); err != nil {
		return err
	}
	ds, err := ch.Consume(m.topo.Park(i), "", false, false, false, false, nil)
	if err != nil {
		return err
	}
	return m.moveQueue(ctx, ds, &held)
}

// moveQueue moves one park queue's messages as they come due.
func (m *parkMover) moveQueue(ctx context.Context, ds <-chan amqp.Delivery, held *atomic.Int64) error {
	var waiting []amqp.Delivery
	take := func(d amqp.Delivery) {
		held.Add(1)
		m.counts.moving.Add(1)
		waiting = append(waiting, d)
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var tick <-chan time.Time
		if len(waiting) > 0 {
			due := dueOf(waiting[0].Headers)
			for _, d := range waiting[1:] {
				due = minTime(due, dueOf(d.Headers))
			}
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
			for more := true; more && len(waiting) < parkMovePrefetch; {
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
		now := time.Now()
		var move []amqp.Delivery
		kept := waiting[:0]
		for _, d := range waiting {
			if len(move) < moveBatch && !dueOf(d.Headers).After(now) {
				move = append(move, d)
			} else {
				kept = append(kept, d)
			}
		}
		waiting = kept
		if len(move) == 0 {
			continue
		}
		if err := m.move(ctx, move); err != nil {
			return err
		}
		held.Add(-int64(len(move)))
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
		wait = min(max(2*wait, time.Second), moveRetryMax)
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

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
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

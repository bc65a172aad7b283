// Deliveries: each URL of a shard's message (one, or a batch) becomes an
// entry held for its host, is parked when its host's turn is too far
// away, or is settled at once (a duplicate, a URL of a host that is down,
// an unreadable message); the message is acked after its last URL.

package frontier

import (
	"container/heap"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/urlrule"
)

// delivery is one message of a shard: one URL, or a batch of them (header
// hdrBatch). Each URL becomes an entry and settles on its own; the message
// is acked when its last URL is settled, or nacked back whole when one of
// them could not be (a failed record). So a scheduler gone with a batch
// half settled gets it back whole, and the URLs it settled are then found
// done in the seen store, not fetched again. A URL settled by moving it to
// another queue (parked, dead-lettered) would not be found done: once one
// has moved, the URLs that asked to go back are published again alone
// instead (sendBack), and the message is acked.
//
// It keeps only what settling needs: the whole amqp.Delivery (296 bytes,
// with its own strings, headers and body) was about two thirds of what a
// held URL cost the scheduler, and the body is already decoded into the
// entries' messages (bench's hosts scenario: 2,040 -> 967 live heap bytes
// per host).
type delivery struct {
	ack amqp.Acknowledger
	tag uint64
	// raw is the whole delivery of a message that could not be decoded (no
	// entry.msg), for the dead-letter queue; nil otherwise.
	raw  *amqp.Delivery
	left atomic.Int32 // URLs not settled yet
	// requeue: a URL's settlement failed; the message goes back whole once
	// its other URLs are settled.
	requeue atomic.Bool
	// void: its channel closed, so RabbitMQ has requeued it already; it is
	// neither acked nor nacked.
	void atomic.Bool
	// moved: one of its URLs was published to another queue (confirmed).
	moved atomic.Bool
	// back holds the entries that asked to go back (requeue), for sendBack.
	backMu sync.Mutex
	back   []*entry
}

// Ack acks the message, as amqp.Delivery.Ack.
func (d *delivery) Ack(multiple bool) error {
	if d.ack == nil {
		return amqp.ErrDeliveryNotInitialized
	}
	return d.ack.Ack(d.tag, multiple)
}

// Nack nacks the message, as amqp.Delivery.Nack.
func (d *delivery) Nack(multiple, requeue bool) error {
	if d.ack == nil {
		return amqp.ErrDeliveryNotInitialized
	}
	return d.ack.Nack(d.tag, multiple, requeue)
}

func (a consumer) onDelivery(ch *amqp.Channel, shard int, d amqp.Delivery) {
	// A park message is back in its shard: owed no more, whatever comes of
	// this delivery (a delivery of a closed channel is in the shard again).
	a.parks.settle(d.Headers)
	if ch != a.consumeCh {
		a.unacked.Add(-1)
		return // from a channel already closed: RabbitMQ requeued it
	}
	dl := &delivery{ack: d.Acknowledger, tag: d.DeliveryTag}
	ms, err := decodeDelivery(d.Body, d.Headers)
	if err != nil {
		dl.raw = &d
		dl.left.Store(1)
		a.settler().deadLetter(&entry{dl: dl, shard: shard, unread: true}, ReasonUnreadable, fmt.Sprintf("unreadable message: %v", err))
		return
	}
	// unacked counts URLs: the message counted one when it came.
	dl.left.Store(int32(len(ms)))
	a.unacked.Add(int64(len(ms) - 1))
	now := time.Now()
	// The headers are the message's: one reading serves each of its URLs.
	attempt, lost, sinkFails := headerInt(d.Headers, hdrAttempt), headerInt(d.Headers, hdrLost), headerInt(d.Headers, hdrSinkFails)
	for _, m := range ms {
		a.onURL(&entry{dl: dl, msg: m, shard: shard, attempt: attempt, lost: lost, sinkFails: sinkFails}, now)
	}
}

// onURL takes one URL of a delivery: held for its host, parked, or settled
// at once (a duplicate, a URL of a host that is down, an unreadable URL).
func (a consumer) onURL(e *entry, now time.Time) {
	m := e.msg
	hostName, err := urlrule.HTTPHostKey(m.URL)
	if err != nil {
		a.settler().deadLetter(e, ReasonUnreadable, fmt.Sprintf("unparseable URL %q: %v", m.URL, err))
		return
	}
	k := seen.KeyOf(m.URL)
	e.key = k
	if _, ok := a.held[k]; ok {
		// In flight here: this copy is a duplicate message (a link published
		// twice); the entry held settles the URL.
		a.duplicates.Add(1)
		a.settler().ackEntry(e)
		return
	}
	if m.Revisit != 0 {
		// Back from the revisit schedule: done, and due again.
		if a.releaser().revisitDuplicate(k, m.Revisit) {
			a.duplicates.Add(1)
			a.settler().ackEntry(e)
			return
		}
	} else if done, err := a.srv.store.Done(a.key, k); err != nil {
		a.log.Error("seen store", "err", err)
	} else if done {
		a.duplicates.Add(1)
		a.settler().ackEntry(e)
		return
	}
	if re := a.live.Load().excluded(m.URL); re != "" {
		a.settler().dropRecorded(e, ReasonExcluded, "excluded by "+re)
		return
	}
	h := a.hosts[hostName]
	if h == nil {
		h = a.newHost(hostName, m.URL)
	}
	a.seq++
	e.seq = a.seq
	if d := h.downFor(urlrule.Origin(m.URL)); d != nil {
		a.settler().deadLetter(e, d.why, d.message(h, urlrule.Origin(m.URL)))
		return
	}
	e.prio = a.policy.Priority(Item{URL: m.URL, Host: hostName, Depth: m.Depth, Embed: m.Embeds > 0, Score: m.Score, HostFetched: h.fetched})
	e.arrived = now
	if wait := a.expectedWait(h, now); wait > holdWindow {
		a.settler().park(e, wait, e.attempt, e.lost, "", "")
		return
	}
	a.held[k] = e
	heap.Push(&h.queue, e)
	a.leaser().place(h, now)
}

// expectedWait estimates when a URL added now to h's queue would start:
// after the URLs queued before it, one delay apart (the delay spaces a
// host's request starts whatever its concurrency, so a Crawl-delay of 1 s
// starts one URL a second even at 4 at a time).
func (a consumer) expectedWait(h *host, now time.Time) time.Duration {
	wait := h.next.Sub(now)
	if wait < 0 {
		wait = 0
	}
	if h.robotsState == robotsReady && h.robots != nil && h.robots.Unreachable {
		wait = max(wait, h.robotsAt.Sub(now))
	}
	return wait + time.Duration(len(h.queue))*h.spacing()
}

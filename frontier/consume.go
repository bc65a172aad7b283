// Consuming: the actor subscribes to its campaign's shard queues (its own
// share first, then the others as a standby), and notices and repairs a
// consume channel or consumer that RabbitMQ ended.

package frontier

import (
	"fmt"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// consumeState is whether and on which channel the actor consumes, and
// when it tries again after consuming broke. The actor embeds it. Actor
// goroutine only, but for consumeErr and isConsuming, which Stats reads.
type consumeState struct {
	consumeCh *amqp.Channel
	consuming bool
	// resubscribeAt: consuming broke while sessions need it; try again then
	// (with backoff resubscribeWait), and show consumeErr in the stats.
	resubscribeAt   time.Time
	resubscribeWait time.Duration
	consumeErr      atomic.Pointer[string]
	isConsuming     atomic.Bool // consuming, for Stats
}

func (c *consumeState) setConsumeErr(why string) { c.consumeErr.Store(&why) }

func (c *consumeState) consumeErrText() string {
	if p := c.consumeErr.Load(); p != nil {
		return *p
	}
	return ""
}

// consumer is the campaign's actor seen from its shard queues: it
// subscribes to them, declaring vanished ones again, and releases them
// (subscribe, subscribeOrRepair, release, releaseIfIdle), takes their
// deliveries (onDelivery, onURL), tells that consuming broke
// (consumeLost) or that queues vanished (shardsVanished), and tries again
// after consuming broke (resubscribeIfDue). Actor goroutine only, but for
// forward, a goroutine per shard consumed that posts its deliveries to the
// actor, and shardsVanished, which only logs, counts and records.
type consumer struct{ *campaignActor }

// consumer returns a's consumer.
func (a *campaignActor) consumer() consumer { return consumer{a} }

// subscribe starts consuming the campaign's shards: first this scheduler's
// own share, then, as a standby, the others (single-active-consumer makes
// the first subscriber of a shard its owner).
func (a consumer) subscribe() error {
	if a.consuming {
		return nil
	}
	if a.stopping {
		return fmt.Errorf("campaign %s is closing", a.cfg.ID)
	}
	ch, err := a.srv.mq.channel()
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	if err := ch.Qos(a.srv.cfg.prefetchMessages(), 0, false); err != nil {
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
	a.startMover()
	a.isConsuming.Store(true)
	a.resubscribeAt, a.resubscribeWait = time.Time{}, 0
	a.consumeErr.Store(nil)
	a.log.Info("consuming shards", "own", len(order)/a.srv.cfg.Replicas, "replicas", a.srv.cfg.Replicas)
	return nil
}

// prefetchMessages is the consumers' prefetch in messages. RabbitMQ counts
// messages, and a batch holds up to Batch URLs: Prefetch/Batch keeps the
// URLs held per shard near Prefetch when batches are full. They seldom
// are once a crawl's links are mostly known (a few new links a record),
// and parked URLs come back in batches of those parked together, often
// few: the window never goes below min(Prefetch, minPrefetch) messages,
// so that a slow host holding
// holdWindow of its URLs (30 at a 1 s delay) leaves room in its shard for
// the others. At worst a shard holds minPrefetch x Batch URLs.
func (c ServerConfig) prefetchMessages() int {
	return max(c.Prefetch/max(c.Batch, 1), min(c.Prefetch, minPrefetch))
}

// minPrefetch is the least prefetch window, in messages, of a shard.
const minPrefetch = 64

// forward hands a shard's deliveries to the actor. Its end, other than by
// release, means consuming broke: the channel closed, or RabbitMQ cancelled
// the consumer (its queue was deleted).
func (a consumer) forward(ch *amqp.Channel, shard int, ds <-chan amqp.Delivery) {
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
func (a consumer) consumeLost(ch *amqp.Channel, why string) {
	if ch != a.consumeCh {
		return
	}
	a.log.Warn("consuming broke; the deliveries held went back to their queues", "reason", why)
	a.consumeCh = nil
	a.consuming = false
	a.isConsuming.Store(false)
	a.stopMover()
	a.dropHeld()
	go ch.Close() // may wait on RabbitMQ; the actor does not
	a.setConsumeErr(why)
	if len(a.sessions) > 0 && !a.stopping {
		a.resubscribeAt = time.Now()
		a.resubscribeIfDue()
	}
}

// resubscribeIfDue retries consuming after it broke, with backoff (1 s,
// doubling to 5 s). While it fails, the reason is in the campaign's stats
// (ConsumeError), so `starter status` shows it; the fetchers' sessions stay
// open and get leases as soon as it works again.
func (a consumer) resubscribeIfDue() {
	if a.consuming || a.resubscribeAt.IsZero() || a.stopping || time.Now().Before(a.resubscribeAt) {
		return
	}
	if len(a.sessions) == 0 {
		a.resubscribeAt = time.Time{}
		return
	}
	if err := a.subscribeOrRepair(); err != nil {
		a.resubscribeWait = backoff(a.resubscribeWait)
		a.resubscribeAt = time.Now().Add(a.resubscribeWait)
		a.setConsumeErr(err.Error())
		a.log.Error("consuming again failed; retrying", "err", err, "in", a.resubscribeWait)
	}
}

// dropHeld forgets every held delivery (their channel is gone, so RabbitMQ
// has requeued them); leases out stay valid for their fetchers, but their
// outcomes can no longer ack.
func (a consumer) dropHeld() {
	for k, e := range a.held {
		a.settler().voidEntry(e)
		delete(a.held, k)
	}
	for _, h := range a.hosts {
		h.queue = nil
		a.leaser().place(h, time.Now())
	}
}

// release stops consuming: closing the channel returns every unacked
// delivery to its queue (and lets a standby scheduler take the shards).
func (a consumer) release() {
	if !a.consuming {
		return
	}
	ch := a.consumeCh
	a.consumeCh = nil
	a.consuming = false
	a.isConsuming.Store(false)
	a.stopMover()
	a.dropHeld()
	if ch != nil {
		ch.Close()
	}
	a.log.Info("released shards")
}

func (a consumer) releaseIfIdle() {
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

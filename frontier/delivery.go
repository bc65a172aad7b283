// Deliveries: each message of a shard becomes an entry held for its host,
// is parked when its host's turn is too far away, or is settled at once
// (a duplicate, a URL of a host that is down, an unreadable message).

package frontier

import (
	"container/heap"
	"fmt"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/urlrule"
)

func (a *campaignActor) onDelivery(ch *amqp.Channel, shard int, d amqp.Delivery) {
	if ch != a.consumeCh {
		a.unacked.Add(-1)
		return // from a channel already closed: RabbitMQ requeued it
	}
	m, err := decodeMsg(d.Body)
	if err != nil {
		a.deadLetter(&entry{d: keepRaw(d), shard: shard}, ReasonUnreadable, fmt.Sprintf("unreadable message: %v", err))
		return
	}
	u, err := url.Parse(m.URL)
	hostName := ""
	if err == nil {
		hostName, err = urlrule.HostKey(m.URL)
	}
	if err == nil && u.Scheme != "http" && u.Scheme != "https" {
		err = fmt.Errorf("scheme %q is not http or https", u.Scheme)
	}
	if err != nil {
		a.deadLetter(&entry{d: keepDelivery(d), msg: m, shard: shard}, ReasonUnreadable, fmt.Sprintf("unparseable URL %q: %v", m.URL, err))
		return
	}
	k := seen.KeyOf(m.URL)
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
	e := &entry{key: k, msg: m, d: keepDelivery(d), shard: shard, attempt: headerInt(d.Headers, hdrAttempt), lost: headerInt(d.Headers, hdrLost), sinkFails: headerInt(d.Headers, hdrSinkFails), seq: a.seq}
	if d := h.downFor(originOf(m.URL)); d != nil {
		a.deadLetter(e, d.why, d.message(h, originOf(m.URL)))
		return
	}
	e.prio = a.policy.Priority(Item{URL: m.URL, Host: hostName, Depth: m.Depth, Score: m.Score, HostFetched: h.fetched})
	now := time.Now()
	e.arrived = now
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

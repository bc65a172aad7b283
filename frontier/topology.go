package frontier

import (
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// Shards is the number of shard queues per campaign. A URL's shard is a
// hash of its host's politeness key (campaign.Config.ClockKey: the host
// name by default, else its registered domain or group), so a host, and
// every host of a domain or group, lives in exactly one shard and its
// owning scheduler keeps its politeness state without coordination. It is
// fixed: every scheduler and every seeding must agree on it.
const Shards = 16

// MaxPriority is the highest message priority level, and the
// x-max-priority of shard queues declared before batched shards
// (topoPriority).
const MaxPriority = 9

// parkTTLs are the parking queues' waits. A URL whose host must wait
// (politeness, backoff, retry) is re-published to the parking queue whose
// wait best fits its own, confirmed, then acked; when the wait ends a
// scheduler's park mover publishes it back to its shard (parkmove.go). A
// campaign started before the movers has park queues with these as
// message TTLs, which dead-letter back to the shards at-least-once.
var parkTTLs = []time.Duration{time.Second, 10 * time.Second, time.Minute, 10 * time.Minute}

// Topology names a campaign's queues and exchanges.
type Topology struct {
	Campaign string
}

func (t Topology) prefix() string { return "drover." + t.Campaign + "." }

// Shard returns the name of shard queue i.
func (t Topology) Shard(i int) string { return fmt.Sprintf("%ss%02d", t.prefix(), i) }

// Dead returns the dead-letter queue's name.
func (t Topology) Dead() string { return t.prefix() + "dead" }

// Park returns the name of the parking queue (and of its fanout exchange)
// for TTL index i.
func (t Topology) Park(i int) string { return fmt.Sprintf("%spark.%s", t.prefix(), parkTTLs[i]) }

// ShardOf returns the shard of a politeness key (a host name, for a
// campaign keyed by host).
func ShardOf(key string) int {
	h := fnv.New32a()
	h.Write([]byte(key))
	return int(h.Sum32() % Shards)
}

// parkFor returns the index of the parking queue for a wait of d: the
// largest TTL not above d (the URL comes back a little early rather than
// late; the scheduler parks it again if its host still waits).
func parkFor(d time.Duration) int {
	i := 0
	for j, ttl := range parkTTLs {
		if ttl <= d {
			i = j
		}
	}
	return i
}

// Shard queue topologies. RabbitMQ refuses to redeclare a queue with other
// arguments (PRECONDITION_FAILED, which closes the channel), so a campaign
// keeps the shards it was started with; only new campaigns get the type
// they ask for (campaign.Config.QueueType, or the scheduler's default).
const (
	// topoPriority: classic shards with x-max-priority (the first topology):
	// RabbitMQ delivered a shard's most urgent URLs first.
	topoPriority = 1
	// topoClassic: classic shards without x-max-priority. A priority queue
	// cost RabbitMQ more CPU per message; priority lives in the scheduler,
	// which orders each host's held URLs by the policy, and a shard
	// delivers in publish order. A classic queue lives on one node: its
	// URLs are lost with that node's disk.
	topoClassic = 2
	// topoQuorum: quorum shards and dead-letter queue, replicated by Raft
	// over the cluster's nodes (three by default, RabbitMQ's
	// quorum_queue default), with their leaders spread over the nodes
	// (x-queue-leader-locator balanced). They outlive the loss of a
	// minority of the nodes, disks included.
	topoQuorum = 3
	// topoClassicMoved and topoQuorumMoved: the shards of topoClassic and
	// topoQuorum, with park queues that neither expire nor dead-letter:
	// the schedulers' park movers take each parked message, hold it until
	// its wait ends and publish it back to its shard (parkmove.go).
	// RabbitMQ's at-least-once dead-lettering, which earlier park queues
	// relied on, can strand messages after a partition in a cluster (its
	// dead-letter worker lost with a leader change): in no queue's count,
	// never handed over.
	topoClassicMoved = 4
	topoQuorumMoved  = 5
)

// movedParks reports whether a topology's park queues are emptied by the
// park movers alone (no TTL, no dead-lettering).
func movedParks(version int) bool { return version >= topoClassicMoved }

// Queue types a campaign or a scheduler may ask for
// (campaign.Config.QueueType, ServerConfig.QueueType).
const (
	QueueClassic = "classic"
	QueueQuorum  = "quorum"
)

// topoOf is the topology of a queue type ("" or unknown: classic).
func topoOf(queueType string) int {
	if queueType == QueueQuorum {
		return topoQuorumMoved
	}
	return topoClassicMoved
}

// quorumShards reports whether a topology's shards are quorum queues.
func quorumShards(version int) bool { return version == topoQuorum || version == topoQuorumMoved }

// quorumDeliveryLimit is the x-delivery-limit of quorum shards: RabbitMQ
// 4 dead-letters (or drops, without a dead-letter exchange) a message
// redelivered more than 20 times by default, and a URL requeued by every
// pause, restart and lost connection of a long crawl must never be
// dropped. Lost leases are bounded by the scheduler's own count (maxLost).
const quorumDeliveryLimit = 1_000_000

func shardArgs(version int) amqp.Table {
	args := amqp.Table{"x-single-active-consumer": true}
	switch version {
	case topoPriority:
		args["x-max-priority"] = int32(MaxPriority)
	case topoQuorum, topoQuorumMoved:
		args["x-queue-type"] = "quorum"
		args["x-queue-leader-locator"] = "balanced"
		args["x-delivery-limit"] = int64(quorumDeliveryLimit)
	}
	return args
}

func deadArgs(version int) amqp.Table {
	if quorumShards(version) {
		return amqp.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "balanced"}
	}
	return nil
}

// parkArgs are the arguments of the park queue of TTL index i. Park
// queues are quorum queues in every topology: a parked URL outlives the
// loss of a node. Those of topologies before the movers expire their
// messages after their TTL and dead-letter them at-least-once, through
// the default exchange by the message's routing key (its shard queue's
// name); the movers' keep their messages until a mover takes them, with
// no delivery limit (RabbitMQ 4 drops a quorum queue's message
// redelivered 20 times by default).
func parkArgs(version, i int) amqp.Table {
	if movedParks(version) {
		return amqp.Table{"x-queue-type": "quorum", "x-queue-leader-locator": "balanced", "x-delivery-limit": int64(quorumDeliveryLimit)}
	}
	return amqp.Table{
		"x-queue-type":           "quorum",
		"x-message-ttl":          int64(parkTTLs[i] / time.Millisecond),
		"x-dead-letter-exchange": "",
		"x-dead-letter-strategy": "at-least-once",
		"x-overflow":             "reject-publish",
	}
}

// Declare creates the campaign's queues if they do not exist, as classic
// shards with moved park queues. It is idempotent; the scheduler itself
// uses declareKeeping, which keeps an earlier campaign's queues as they
// are.
//
// Shards have single-active-consumer (one owning scheduler per shard,
// failover to a standby).
func (t Topology) Declare(ch *amqp.Channel) error {
	return t.declare(ch, topoClassicMoved)
}

// declareKeeping declares the campaign's queues with the topology of
// queueType or, when RabbitMQ says its queues exist with other arguments
// (PRECONDITION_FAILED: a campaign started before, or by a scheduler with
// another default), with each other one in turn, on a new channel. It
// returns the version declared.
func (t Topology) declareKeeping(open func() (*amqp.Channel, error), queueType string) (int, error) {
	first := topoOf(queueType)
	order := []int{first}
	for _, v := range []int{topoQuorumMoved, topoClassicMoved, topoQuorum, topoClassic, topoPriority} {
		if v != first {
			order = append(order, v)
		}
	}
	for _, v := range order {
		ch, err := open()
		if err != nil {
			return 0, err
		}
		err = t.declare(ch, v)
		ch.Close()
		var aerr *amqp.Error
		if errors.As(err, &aerr) && aerr.Code == amqp.PreconditionFailed {
			continue
		}
		return v, err
	}
	return 0, fmt.Errorf("declare %s: its shards match no known topology", t.Shard(0))
}

func (t Topology) declare(ch *amqp.Channel, version int) error {
	for i := range Shards {
		if _, err := ch.QueueDeclare(t.Shard(i), true, false, false, false, shardArgs(version)); err != nil {
			return fmt.Errorf("declare %s: %w", t.Shard(i), err)
		}
	}
	if _, err := ch.QueueDeclare(t.Dead(), true, false, false, false, deadArgs(version)); err != nil {
		return fmt.Errorf("declare %s: %w", t.Dead(), err)
	}
	for i := range parkTTLs {
		name := t.Park(i)
		if _, err := ch.QueueDeclare(name, true, false, false, false, parkArgs(version, i)); err != nil {
			return fmt.Errorf("declare %s: %w", name, err)
		}
		if err := ch.ExchangeDeclare(name, amqp.ExchangeFanout, true, false, false, false, nil); err != nil {
			return fmt.Errorf("declare exchange %s: %w", name, err)
		}
		if err := ch.QueueBind(name, "", name, false, nil); err != nil {
			return fmt.Errorf("bind %s: %w", name, err)
		}
	}
	return nil
}

// queueNames lists every queue of the campaign whose messages count as
// queued work (the dead-letter queue does not).
func (t Topology) queueNames() []string {
	names := make([]string, 0, Shards+len(parkTTLs))
	for i := range Shards {
		names = append(names, t.Shard(i))
	}
	for i := range parkTTLs {
		names = append(names, t.Park(i))
	}
	return names
}

// Counts returns the number of ready messages in the campaign's work
// queues and in its dead-letter queue. A campaign never declared counts 0.
func (t Topology) Counts(conn *amqp.Connection) (queued, dead int64, err error) {
	c, err := t.counts(conn)
	return c.queued, c.dead, err
}

// queueCounts is what RabbitMQ says of a campaign's queues.
type queueCounts struct {
	queued, dead int64
	// consumers: the most consumers any shard queue has. Every scheduler
	// that consumes a campaign subscribes to all its shards (its own, then
	// the others as a standby), so this is how many schedulers consume it.
	consumers int64
	// uncounted: the queues RabbitMQ could not count (see verifyEmpty).
	uncounted int64
}

func (c *queueCounts) add(t Topology, name string, messages, consumers int) {
	switch {
	case name == t.Dead():
		c.dead += int64(messages)
	default:
		c.queued += int64(messages)
	}
	if strings.HasPrefix(name, t.prefix()+"s") {
		c.consumers = max(c.consumers, int64(consumers))
	}
}

// counts reads the campaign's queues. A queue that says it holds nothing
// and has no consumer is checked (verifyEmpty): a quorum queue whose
// leader does not answer within RabbitMQ's 250 ms says exactly that
// (rabbit_quorum_queue:stat), whatever it holds; taken as empty, it would
// let the campaign end as drained, and its queues be deleted, with URLs
// in them.
func (t Topology) counts(conn *amqp.Connection) (queueCounts, error) {
	var c queueCounts
	var empty []string
	err := t.inspect(conn, func(name string, q amqp.Queue) {
		if q.Messages == 0 && q.Consumers == 0 {
			empty = append(empty, name)
			return
		}
		c.add(t, name, q.Messages, q.Consumers)
	})
	if err != nil {
		return c, err
	}
	for i, n := range verifyEmpty(conn, empty) {
		switch {
		case n < 0:
			c.uncounted++
		case n > 0:
			c.add(t, empty[i], n, 0)
		}
	}
	return c, nil
}

// verifyGetTimeout bounds verifyEmpty's gets; a queue that does not
// answer within it is uncounted.
const verifyGetTimeout = 5 * time.Second

// verifyEmpty checks, at once, that each named queue is empty, the one
// way AMQP 0-9-1 gives that goes through a quorum queue's leader: a
// basic.get. For each it returns 0 (get-empty: the leader says empty), 1
// (a message: it goes back to the queue, requeued, and the count said 0
// wrongly), or -1 (no answer within verifyGetTimeout, or an error: the
// queue cannot be counted now). A get left waiting past the timeout has
// its channel closed in the background.
func verifyEmpty(conn *amqp.Connection, names []string) []int {
	out := make([]int, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = getOne(conn, name)
		}()
	}
	wg.Wait()
	return out
}

func getOne(conn *amqp.Connection, name string) int {
	ch, err := conn.Channel()
	if err != nil {
		return -1
	}
	res := make(chan int, 1)
	go func() {
		d, ok, err := ch.Get(name, false)
		switch {
		case err != nil:
			res <- -1
		case !ok:
			res <- 0
		default:
			if err := d.Nack(false, true); err != nil {
				res <- -1 // the channel's close gives it back all the same
				return
			}
			res <- 1
		}
	}()
	select {
	case n := <-res:
		ch.Close()
		return n
	case <-time.After(verifyGetTimeout):
		go ch.Close()
		return -1
	}
}

// inspect calls f with the state of each of t's queues (the shards, the
// parking and retry queues, the dead-letter queue) that is declared; a
// queue not declared is left out.
func (t Topology) inspect(conn *amqp.Connection, f func(name string, q amqp.Queue)) error {
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer func() { ch.Close() }()
	for _, name := range append(t.queueNames(), t.Dead()) {
		q, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		if err != nil {
			var aerr *amqp.Error
			if errors.As(err, &aerr) && aerr.Code == amqp.NotFound {
				// A missing queue closes the channel: reopen and go on.
				if ch, err = conn.Channel(); err != nil {
					return fmt.Errorf("open channel: %w", err)
				}
				continue
			}
			return fmt.Errorf("inspect %s: %w", name, err)
		}
		f(name, q)
	}
	return nil
}

// Delete removes the campaign's queues and exchanges (its dead-letter queue
// too: its messages were counted and logged). The queues go at once, each
// on a channel of its own: deleting a quorum queue waits for its members,
// seconds when one is on a node that is down, and a campaign has 21.
func (t Topology) Delete(conn *amqp.Connection) error {
	names := append(t.queueNames(), t.Dead())
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := conn.Channel()
			if err != nil {
				errs[i] = fmt.Errorf("open channel: %w", err)
				return
			}
			defer ch.Close()
			if _, err := ch.QueueDelete(name, false, false, false); err != nil {
				errs[i] = fmt.Errorf("delete %s: %w", name, err)
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	ch, err := conn.Channel()
	if err != nil {
		return fmt.Errorf("open channel: %w", err)
	}
	defer ch.Close()
	for i := range parkTTLs {
		if err := ch.ExchangeDelete(t.Park(i), false, false); err != nil {
			return fmt.Errorf("delete exchange %s: %w", t.Park(i), err)
		}
	}
	return nil
}

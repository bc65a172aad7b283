package frontier

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// publisher publishes persistent messages with publisher confirms; safe for
// concurrent use (amqp091 serializes publishes on a channel and matches
// confirms by sequence number).
//
// Every message is published mandatory: one that reaches no queue (its
// campaign's queues were deleted) comes back as a basic.return before its
// confirm, and the publish fails instead of counting a confirmed drop. A
// channel that RabbitMQ closed (a publish to an exchange deleted under it)
// is reopened by the next publish, so one campaign's closing cannot break
// the scheduler's publishing for every other.
type publisher struct {
	mq  *rabbit
	seq atomic.Uint64

	mu  sync.Mutex
	cur *pubChannel

	// fault, when set (tests only, through export_test.go), is asked before
	// each message is published; an error fails the publish as RabbitMQ
	// would. Tests set it while the scheduler runs (the park movers
	// publish at any time), hence atomic.
	fault atomic.Pointer[func(exchange, key string) error]
	// confirmed, when set (RegisterMetrics), is told how long each
	// confirmed batch took.
	confirmed atomic.Pointer[func(time.Duration)]
}

// pubChannel is one confirm-mode channel and the goroutine that collects
// its returned messages.
type pubChannel struct {
	ch      *amqp.Channel
	returns chan amqp.Return
	barrier chan chan struct{}
	dead    chan struct{}

	mu       sync.Mutex
	returned map[string]string // message ID -> RabbitMQ's reason
}

// newPublisher returns a publisher whose channel opens with its first
// publish (RabbitMQ may not be up yet).
func newPublisher(mq *rabbit) (*publisher, error) {
	return &publisher{mq: mq}, nil
}

// channel returns the open publishing channel, opening a new one when
// RabbitMQ closed the last.
func (p *publisher) channel() (*pubChannel, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur != nil && !p.cur.ch.IsClosed() {
		return p.cur, nil
	}
	ch, err := p.mq.channel()
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, fmt.Errorf("confirm mode: %w", err)
	}
	pc := &pubChannel{
		ch:       ch,
		returns:  ch.NotifyReturn(make(chan amqp.Return)),
		barrier:  make(chan chan struct{}),
		dead:     make(chan struct{}),
		returned: map[string]string{},
	}
	go pc.watch()
	p.cur = pc
	return pc, nil
}

// watch records returned messages. RabbitMQ sends a message's return
// before its confirm, and amqp091 hands the return over before it reads
// the confirm; a barrier request answered by this same loop therefore
// comes after every return of the messages already confirmed.
func (pc *pubChannel) watch() {
	defer close(pc.dead)
	for {
		select {
		case r, ok := <-pc.returns:
			if !ok {
				return
			}
			pc.mu.Lock()
			pc.returned[r.MessageId] = fmt.Sprintf("%d %s", r.ReplyCode, r.ReplyText)
			pc.mu.Unlock()
		case done := <-pc.barrier:
			close(done)
		}
	}
}

// sync waits until every return sent before now has been recorded.
func (pc *pubChannel) sync() {
	done := make(chan struct{})
	select {
	case pc.barrier <- done:
		<-done
	case <-pc.dead:
	}
}

// take reports and forgets whether the message id came back.
func (pc *pubChannel) take(id string) (string, bool) {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	why, ok := pc.returned[id]
	delete(pc.returned, id)
	return why, ok
}

// outMsg is one message to publish.
type outMsg struct {
	exchange, key string
	msg           amqp.Publishing
}

// publish sends every message and waits until RabbitMQ confirmed all of
// them, each routed to a queue; any nack, return or error fails the whole
// batch (the caller must then not ack what the batch stood for; a later
// retry may publish duplicates, which dedup absorbs).
func (p *publisher) publish(ctx context.Context, msgs []outMsg) error {
	if len(msgs) == 0 {
		return nil
	}
	pc, err := p.channel()
	if err != nil {
		return err
	}
	start := time.Now()
	confirms := make([]*amqp.DeferredConfirmation, 0, len(msgs))
	ids := make([]string, 0, len(msgs))
	defer func() {
		for _, id := range ids {
			pc.take(id)
		}
	}()
	for _, m := range msgs {
		if f := p.fault.Load(); f != nil {
			if err := (*f)(m.exchange, m.key); err != nil {
				return fmt.Errorf("publish to %q: %w", m.key, err)
			}
		}
		m.msg.DeliveryMode = amqp.Persistent
		m.msg.MessageId = strconv.FormatUint(p.seq.Add(1), 36)
		ids = append(ids, m.msg.MessageId)
		dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, m.exchange, m.key, true, false, m.msg)
		if err != nil {
			return fmt.Errorf("publish to %q: %w", m.key, err)
		}
		confirms = append(confirms, dc)
	}
	if err := AwaitConfirms(ctx, confirms); err != nil {
		return err
	}
	pc.sync()
	for i, id := range ids {
		if why, ok := pc.take(id); ok {
			return fmt.Errorf("publish to %q reached no queue (%s): %w", msgs[i].key, why, ErrUnroutable)
		}
	}
	if f := p.confirmed.Load(); f != nil {
		(*f)(time.Since(start))
	}
	return nil
}

func (p *publisher) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cur == nil || p.cur.ch.IsClosed() {
		return nil
	}
	return p.cur.ch.Close()
}

// AwaitConfirms waits for RabbitMQ's confirmation of every publish, in
// order; it fails at the first nack, or when ctx ends first.
func AwaitConfirms(ctx context.Context, confirms []*amqp.DeferredConfirmation) error {
	for _, dc := range confirms {
		ok, err := dc.WaitContext(ctx)
		if err != nil {
			return fmt.Errorf("wait for confirm: %w", err)
		}
		if !ok {
			return errors.New("publish nacked by RabbitMQ")
		}
	}
	return nil
}

package frontier

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ErrUnroutable: RabbitMQ returned a published message that reached no
// queue (the campaign's queues are gone); it was not stored.
var ErrUnroutable = errors.New("message reached no queue")

// rabbit is the scheduler's RabbitMQ connection. With a dial function it
// outlives the broker: a connection that RabbitMQ closed (a restart, a
// network cut) is dialled again by the next caller that needs one, at most
// once every redialEvery, and everything built on it (the publishing
// channel, each campaign's consume channel) is opened again on the new
// connection by its own repair path. Without one (NewServer, tests), the
// connection given is the only one.
type rabbit struct {
	dial func() (*amqp.Connection, error)
	log  *slog.Logger

	mu      sync.Mutex
	conn    *amqp.Connection
	lastTry time.Time
	lastErr error
	closed  bool
}

// redialEvery bounds how often a lost connection is dialled again.
const redialEvery = time.Second

// errRabbitClosed: the scheduler is closing.
var errRabbitClosed = errors.New("scheduler closed")

// get returns an open connection, dialling a new one when the last was
// lost.
func (r *rabbit) get() (*amqp.Connection, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, errRabbitClosed
	}
	if r.conn != nil && !r.conn.IsClosed() {
		return r.conn, nil
	}
	if r.dial == nil {
		return nil, fmt.Errorf("RabbitMQ connection lost: %w", amqp.ErrClosed)
	}
	if time.Since(r.lastTry) < redialEvery {
		if r.lastErr == nil {
			// The connection dialled last was lost: dialling again soon.
			return nil, fmt.Errorf("RabbitMQ connection lost, dialling again within %s: %w", redialEvery, amqp.ErrClosed)
		}
		return nil, fmt.Errorf("RabbitMQ unreachable: %w", r.lastErr)
	}
	r.lastTry = time.Now()
	conn, err := r.dial()
	if err != nil {
		r.lastErr = err
		r.log.Warn("RabbitMQ unreachable; retrying", "err", err)
		return nil, fmt.Errorf("RabbitMQ unreachable: %w", err)
	}
	if r.conn != nil {
		r.log.Info("RabbitMQ connection restored")
	}
	r.conn, r.lastErr = conn, nil
	return conn, nil
}

// channel opens a channel on the current connection.
func (r *rabbit) channel() (*amqp.Channel, error) {
	conn, err := r.get()
	if err != nil {
		return nil, err
	}
	ch, err := conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("open channel: %w", err)
	}
	return ch, nil
}

// close closes the connection when the scheduler dialled it.
func (r *rabbit) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	if r.dial != nil && r.conn != nil {
		r.conn.Close()
	}
}

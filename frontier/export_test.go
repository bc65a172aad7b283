package frontier

import (
	"context"
	"time"
)

// SetPublishFault makes s's publisher ask f before each message it
// publishes; an error from f fails that publish. Tests use it to widen the
// failure paths of the ack chain on purpose.
func SetPublishFault(s *Server, f func(exchange, key string) error) {
	if f == nil {
		s.pub.fault.Store(nil)
		return
	}
	s.pub.fault.Store(&f)
}

// Publish publishes one small message through s's publisher, as the
// scheduler's own parks and links are published.
func Publish(s *Server, exchange, key string) error {
	return s.pub.publish(context.Background(), []outMsg{{exchange: exchange, key: key, msg: encodeMsg(urlMsg{URL: "http://127.0.0.1/probe"}, 0, nil)}})
}

// BreakConsume makes RabbitMQ close the consume channel of campaign id on
// s with a channel error (an ack of an unknown delivery tag), as a broker
// does when a channel fails under the scheduler.
func BreakConsume(s *Server, id string) {
	s.mu.Lock()
	a := s.campaigns[id]
	s.mu.Unlock()
	if a == nil {
		return
	}
	a.post(func() {
		if a.consumeCh != nil {
			_ = a.consumeCh.Ack(1<<40, false)
		}
	})
}

// ParkQueues is the number of parking queues (and parking exchanges) of a
// campaign: Topology.Park takes 0 to ParkQueues()-1.
func ParkQueues() int { return len(parkTTLs) }

// SetBetweenNacks makes a record whose outcomes failed call f, with its
// campaign's ID, between their nacks (before each but the first); nil
// removes it. f runs on the record's goroutine: the nacks after it wait
// for it.
func SetBetweenNacks(f func(campaign string)) {
	if f == nil {
		betweenNacks.Store(nil)
		return
	}
	betweenNacks.Store(&f)
}

// SetSitemapRetry makes the publishes of a robots.txt's sitemaps try tries
// times, waiting wait, then doubling, between tries; tries 0 restores the
// defaults.
func SetSitemapRetry(tries int, wait time.Duration) {
	if tries == 0 {
		sitemapRetryOverride.Store(nil)
		return
	}
	sitemapRetryOverride.Store(&[2]time.Duration{time.Duration(tries), wait})
}

// PublishRevisit publishes url to the queue key as the revisit schedule
// releases it, due at due: a copy of a released message.
func PublishRevisit(s *Server, key, url string, due time.Time) error {
	return s.pub.publish(context.Background(), []outMsg{{key: key, msg: encodeMsg(urlMsg{URL: url, Revisit: due.UnixNano()}, 0, nil)}})
}

// ParkMoves returns how many park messages campaign id's park mover on s
// moved back to their shards, and how many moves RabbitMQ refused.
func ParkMoves(s *Server, id string) (moved, refused int64) {
	s.mu.Lock()
	a := s.campaigns[id]
	s.mu.Unlock()
	if a == nil {
		return 0, 0
	}
	return a.parkMoves.moved.Load(), a.parkMoves.refused.Load()
}

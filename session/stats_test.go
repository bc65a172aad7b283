package session

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestIdleCountsEveryConsumer: idle needs nothing queued, held, leased or
// unconfirmed, and every consumer RabbitMQ counts answered for by a
// scheduler that was asked, whether or not one is missing.
func TestIdleCountsEveryConsumer(t *testing.T) {
	cases := []struct {
		name string
		st   Stats
		idle bool
	}{
		{"nothing anywhere, no consumer", Stats{}, true},
		{"one scheduler consuming, answering", Stats{Consumers: 1, Answering: 1}, true},
		{"queued", Stats{Queued: 1, Consumers: 1, Answering: 1}, false},
		{"held", Stats{Held: 1, Consumers: 1, Answering: 1}, false},
		{"in flight", Stats{InFlight: 1, Consumers: 1, Answering: 1}, false},
		{"unconfirmed", Stats{Pending: 1, Consumers: 1, Answering: 1}, false},
		// A connection cut on the scheduler's side: RabbitMQ still counts
		// the old consumer beside the new one, and nobody is missing.
		{"an old connection RabbitMQ still holds", Stats{Consumers: 2, Answering: 1}, false},
		{"a scheduler not in the list consumes", Stats{Consumers: 1}, false},
		{"a missing scheduler still consumes", Stats{Consumers: 2, Answering: 1, Missing: []string{"b:7420"}}, false},
		{"one scheduler's own stats, consuming", Stats{Consumers: 1, Consuming: true}, true},
		{"one scheduler's own stats, another consumer", Stats{Consumers: 2, Consuming: true}, false},
		{"a missing scheduler is gone", Stats{Consumers: 1, Answering: 1, Missing: []string{"b:7420"}}, true},
		// A quorum queue whose leader did not answer: RabbitMQ said 0.
		{"a queue uncounted", Stats{Uncounted: 1, Consumers: 1, Answering: 1}, false},
		// A parked message in RabbitMQ's dead-letter hand-over, counted in
		// no queue.
		{"a parked message not back", Stats{ParkedOwed: 1, Consumers: 1, Answering: 1}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equalf(t, c.idle, c.st.Idle(), "Idle() for %+v", c.st)
		})
	}
}

// The vanished queues of several schedulers add up to each queue once.
func TestStatsAddVanishedOnce(t *testing.T) {
	var s Stats
	s.Add(Stats{Vanished: []string{"q.s01"}})
	s.Add(Stats{Vanished: []string{"q.s01", "q.s07"}})
	s.Add(Stats{})
	assert.Equal(t, []string{"q.s01", "q.s07"}, s.Vanished, "vanished")
}

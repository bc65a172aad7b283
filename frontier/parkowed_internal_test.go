package frontier

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// A park message is owed from its publish until a delivery with its token
// comes back, or until its TTL and parkReturnGrace have passed; a token of
// another actor, or none, settles nothing.
func TestParkOwedUntilBackOrGivenUp(t *testing.T) {
	now := time.Now()
	p, other := newParkOwed(), newParkOwed()
	first, second := p.owe(0, now), p.owe(len(parkTTLs)-1, now)
	if owed, _ := p.count(now); owed != 2 {
		t.Fatalf("owed %d after two parks, want 2", owed)
	}
	p.settle(amqp.Table{hdrPark: other.owe(0, now)})
	p.settle(amqp.Table{hdrAttempt: int32(1)})
	if owed, _ := p.count(now); owed != 2 {
		t.Fatalf("owed %d after deliveries of other tokens, want 2", owed)
	}
	p.settle(amqp.Table{hdrPark: first})
	if owed, _ := p.count(now); owed != 1 {
		t.Fatalf("owed %d after one came back, want 1", owed)
	}
	if owed, gaveUp := p.count(now.Add(parkTTLs[len(parkTTLs)-1] + parkReturnGrace - time.Second)); owed != 1 || gaveUp != 0 {
		t.Fatalf("owed %d, gave up %d within the grace, want 1, 0", owed, gaveUp)
	}
	if owed, gaveUp := p.count(now.Add(parkTTLs[len(parkTTLs)-1] + parkReturnGrace + time.Second)); owed != 0 || gaveUp != 1 {
		t.Fatalf("owed %d, gave up %d past the grace, want 0, 1", owed, gaveUp)
	}
	p.settle(amqp.Table{hdrPark: second}) // back after it was given up: nothing to do
}

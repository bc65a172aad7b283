package frontier

import (
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// A park message is owed from its publish until a delivery with its token
// comes back, or until its TTL and parkReturnGrace have passed; a token of
// another actor, or none, settles nothing.
func TestParkOwedUntilBackOrGivenUp(t *testing.T) {
	now := time.Now()
	p, other := newParkOwed(), newParkOwed()
	first, second := p.owe(0, now), p.owe(len(parkTTLs)-1, now)
	owed, _ := p.count(now)
	require.Equal(t, int64(2), owed, "owed after two parks")
	p.settle(amqp.Table{hdrPark: other.owe(0, now)})
	p.settle(amqp.Table{hdrAttempt: int32(1)})
	owed, _ = p.count(now)
	require.Equal(t, int64(2), owed, "owed after deliveries of other tokens")
	p.settle(amqp.Table{hdrPark: first})
	owed, _ = p.count(now)
	require.Equal(t, int64(1), owed, "owed after one came back")
	owed, gaveUp := p.count(now.Add(parkTTLs[len(parkTTLs)-1] + parkReturnGrace - time.Second))
	require.Equal(t, int64(1), owed, "owed within the grace (gave up %d)", gaveUp)
	require.Zero(t, gaveUp, "gave up within the grace (owed %d)", owed)
	owed, gaveUp = p.count(now.Add(parkTTLs[len(parkTTLs)-1] + parkReturnGrace + time.Second))
	require.Zero(t, owed, "owed past the grace (gave up %d)", gaveUp)
	require.Equal(t, int64(1), gaveUp, "gave up past the grace (owed %d)", owed)
	p.settle(amqp.Table{hdrPark: second}) // back after it was given up: nothing to do
}

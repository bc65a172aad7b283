// Parked URLs owed, in the park queues of campaigns started before the
// park movers (parkmove.go): a URL parked is in its park queue until its TTL ends,
// counted there; then the quorum park queue dead-letters it (at-least-
// once) and RabbitMQ's dead-letter worker hands it over to its shard.
// While the shard refuses the hand-over (a quorum shard whose leader does
// not answer: a partition, its heal, a leader election), the worker holds
// the message, and tries again only after its publisher confirm timeout
// (dead_letter_worker_publisher_confirm_timeout, 3 minutes by default).
// Meanwhile RabbitMQ counts the message in no queue: AMQP's counts are
// the messages ready, and a passive declare or a basic.get of the park
// queue says empty. Taken as drained, the campaign would end and delete
// its queues, the URLs with them.
//
// So the scheduler keeps what it parked: each park message carries a
// token (header hdrPark), owed until a delivery with that token comes
// back, and the campaign is not idle while any is owed (Stats.ParkedOwed).
// A token is given up after its TTL and parkReturnGrace, with an error in
// the log: a message that came back to another scheduler (the shard's
// owner changed), or one RabbitMQ never hands over.

package frontier

import (
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// hdrPark carries a park message's token (parkOwed).
const hdrPark = "x-drover-park"

// parkReturnGrace is how long after its TTL a parked message is waited for:
// three of RabbitMQ's default dead-letter confirm timeouts (3 minutes), so
// that a hand-over refused twice in a row still comes back in time.
const parkReturnGrace = 10 * time.Minute

// parkOwed is a campaign's park messages not back yet, by token, with the
// time each is given up at.
type parkOwed struct {
	mu     sync.Mutex
	owed   map[string]time.Time
	prefix string // unique to this actor: tokens of another never match
	seq    atomic.Uint64
}

var parkActors atomic.Uint64

func newParkOwed() *parkOwed {
	return &parkOwed{owed: map[string]time.Time{}, prefix: strconv.FormatInt(time.Now().UnixNano(), 36) + "." + strconv.FormatUint(parkActors.Add(1), 36) + "."}
}

// owe records a park message for the park queue of TTL index i and
// returns its token, for its hdrPark header.
func (p *parkOwed) owe(i int, now time.Time) string {
	tok := p.prefix + strconv.FormatUint(p.seq.Add(1), 36)
	p.mu.Lock()
	p.owed[tok] = now.Add(parkTTLs[i] + parkReturnGrace)
	p.mu.Unlock()
	return tok
}

// settle forgets the token of headers, if any: its message came back to
// a shard, or its publish failed.
func (p *parkOwed) settle(headers amqp.Table) {
	tok, ok := headers[hdrPark].(string)
	if !ok {
		return
	}
	p.mu.Lock()
	delete(p.owed, tok)
	p.mu.Unlock()
}

// count returns how many park messages are owed, and how many it gave up
// now (their time passed).
func (p *parkOwed) count(now time.Time) (owed, givenUp int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for tok, until := range p.owed {
		if now.After(until) {
			delete(p.owed, tok)
			givenUp++
		}
	}
	return int64(len(p.owed)), givenUp
}

// parkHeaders adds to hdr, the headers of a message parked now in the
// park queue of TTL index i, when it is due back (for the movers) and, if
// its park queue dead-letters, its token. It returns hdr.
func (a settler) parkHeaders(hdr amqp.Table, i int, now time.Time) amqp.Table {
	hdr[hdrDue] = now.Add(parkTTLs[i]).UnixMilli()
	if a.legacyParks {
		hdr[hdrPark] = a.parks.owe(i, now)
	}
	return hdr
}

// stillOwed is Stats.ParkedOwed; a message given up is logged to log.
func (p *parkOwed) stillOwed(log *slog.Logger) int64 {
	owed, givenUp := p.count(time.Now())
	if givenUp > 0 {
		log.Error("parked messages did not come back to this scheduler within their TTL and "+parkReturnGrace.String()+"; the campaign no longer waits for them (another scheduler may have taken them, or RabbitMQ still holds them in its dead-letter hand-over)", "messages", givenUp)
	}
	return owed
}

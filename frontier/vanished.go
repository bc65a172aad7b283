// Vanished shard queues: a shard queue of a live campaign that RabbitMQ no
// longer has (deleted by hand, or lost with its node) took its URLs with
// it. Declaring it again, empty, as any declare would, hides the loss. The
// scheduler tells it instead: an error in its log, the queue in the
// campaign's stats (Stats.Vanished, which `starter status` shows) and a
// failure record of reason vanished (which `starter failures` lists); then
// it declares the queue again, so that the links found later have a
// queue to go to and the rest of the crawl goes on.

package frontier

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/session"
)

// missingShards returns the names of the campaign's shard queues RabbitMQ
// does not have (inspect lists those it has).
func (t Topology) missingShards(conn *amqp.Connection) ([]string, error) {
	have := map[string]bool{}
	if err := t.inspect(conn, func(name string, _ amqp.Queue) { have[name] = true }); err != nil {
		return nil, err
	}
	var missing []string
	for i := range Shards {
		if !have[t.Shard(i)] {
			missing = append(missing, t.Shard(i))
		}
	}
	return missing, nil
}

// vanishedOf returns the shard queues of a campaign that has queues and
// lacks some: none when it has them all, and none when it has none (a
// campaign never seeded, or deleted: its queues are declared as new).
func (s *Server) vanishedOf(key string) ([]string, error) {
	conn, err := s.mq.get()
	if err != nil {
		return nil, err
	}
	missing, err := Topology{Campaign: key}.missingShards(conn)
	if err != nil || len(missing) == Shards {
		return nil, err
	}
	return missing, nil
}

// vanishedShards are the shard queues found gone from RabbitMQ, for the
// stats; any goroutine adds and reads them.
type vanishedShards struct {
	mu sync.Mutex
	qs []string
}

// add adds qs, and returns those of them not there before.
func (v *vanishedShards) add(qs []string) []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	var fresh []string
	for _, q := range qs {
		if !slices.Contains(v.qs, q) {
			v.qs = append(v.qs, q)
			fresh = append(fresh, q)
		}
	}
	return fresh
}

func (v *vanishedShards) list() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.qs)
}

// shardsVanished tells that the shard queues qs vanished: log, stats and
// failure records. A queue is told once per actor.
func (a consumer) shardsVanished(qs []string) {
	fresh := a.vanished.add(qs)
	if len(fresh) == 0 {
		return
	}
	now := time.Now()
	recs := make([]failure.Record, 0, len(fresh))
	for _, q := range fresh {
		a.log.Error("a shard queue of the campaign vanished from RabbitMQ; the URLs it held are lost, and it is declared again, empty", "queue", q)
		a.countReason(session.ReasonVanished)
		recs = append(recs, failure.Record{URL: q, Reason: session.ReasonVanished,
			LastError: "shard queue vanished from RabbitMQ while the campaign ran (deleted, or lost with its node): the URLs it held are lost",
			First:     now, Last: now})
	}
	if err := a.recordFailures(recs); err != nil {
		a.log.Error("recording the vanished shard queues failed (they stay in the stats)", "err", err)
	}
}

// subscribeOrRepair subscribes; when a shard queue is not there
// (NOT_FOUND), it tells the queues that vanished, declares them again and
// subscribes once more.
func (a consumer) subscribeOrRepair() error {
	err := a.subscribe()
	if !isNotFound(err) {
		return err
	}
	vanished, verr := a.srv.vanishedOf(a.key)
	if verr != nil || len(vanished) == 0 {
		return err
	}
	a.shardsVanished(vanished)
	version, derr := a.srv.declare(a.cfg)
	if derr != nil {
		return fmt.Errorf("declaring the vanished shard queues again: %w", derr)
	}
	a.legacyParks = !movedParks(version)
	return a.subscribe()
}

// isNotFound reports whether err is RabbitMQ's NOT_FOUND (a queue that
// does not exist).
func isNotFound(err error) bool {
	var aerr *amqp.Error
	return errors.As(err, &aerr) && aerr.Code == amqp.NotFound
}

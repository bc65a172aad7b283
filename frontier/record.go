// Recording: the I/O of settling a URL, off the actor's goroutine, in the
// order the invariant needs (links confirmed and marked, the URL marked
// done or its failure recorded, then the delivery acked), or re-publishing
// it (park, dead-letter) confirmed before its ack.

package frontier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// recorder is the campaign's actor seen from its record queue: it queues
// the record jobs of outcomes (queueRecord, startRecord, on the actor's
// loop) and writes them (record and what it calls, on the record
// goroutines: splitting a failed record, publishing links, the fetch
// history, the digest index and the revisit schedule), then acks. There
// it reads of the actor only what never changes (key, lineage, clockKey),
// its atomics, and the rest through call.
type recorder struct{ *campaignActor }

// recorder returns a's recorder.
func (a *campaignActor) recorder() recorder { return recorder{a} }

type recordJob struct {
	e     *entry
	links []urlrule.Link
	fail  *failure.Record // a page with an error status, or a failure stored as a page
	// disallowed: links robots.txt forbids (disallowedLinks), recorded as
	// failures and marked queued instead of being published.
	disallowed map[string]bool
	// dead, when set, is the dead-letter message that settles the URL
	// instead of its done mark (refusedJob).
	dead *outMsg
	// from is the session that reported the outcome, when it asked to hear
	// that it was recorded (FrameRecorded), with the outcome's lease.
	from  *fetcherSession
	lease uint64
	// history is the URL's new fetch history (historyOf), written with
	// its done mark.
	history []byte
	// stored is the capture the digest index takes (indexedCapture).
	stored *page.Capture
	// due, in a continuous campaign, is the URL's next fetch, and undue
	// the entry it replaces (revisitSchedule.plan), written with its history.
	due, undue *seen.Due
}

// record publishes the discovered links not yet queued (confirmed), marks
// them queued, marks the URLs done, then acks their deliveries: the order
// the invariant needs. A record that fails is tried again in halves
// (writeSplit), so that the deliveries nacked back to their queues (fetched
// again later, never lost) are only those of the outcomes the failure hit.
//
// The entries leave held on the actor's goroutine before anything is acked
// or nacked: a redelivery that comes after a nack must be taken as the URL
// again, not as a duplicate of an entry still held, and one that comes
// after an ack finds the URL marked done.
func (a recorder) record(ctx context.Context, jobs []recordJob) {
	defer a.pending.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done, failed, err := a.writeSplit(ctx, jobs)
	a.call(func() {
		a.recBacklog.Add(-recordWeight(jobs))
		for _, j := range jobs {
			if a.held[j.e.key] == j.e {
				delete(a.held, j.e.key)
			}
		}
	})
	if len(failed) > 0 {
		a.recordFailed.Add(int64(len(failed)))
		a.log.Error("recording outcome failed; the URL goes back to its queue", "urls", len(failed), "of", len(jobs), "url", failed[0].e.msg.URL, "err", err)
	}
	tellRecorded(done)
	for _, j := range done {
		a.settler().ackEntry(j.e)
	}
	for i, j := range failed {
		if f := betweenNacks.Load(); f != nil && i > 0 {
			(*f)(a.cfg.ID)
		}
		a.settler().nackEntry(j.e)
	}
}

// betweenNacks, when set (tests only, through export_test.go), is called by
// record between the nacks of its failed outcomes, before each but the
// first, with the campaign's ID.
var betweenNacks atomic.Pointer[func(campaign string)]

// writeSplit writes jobs as one record (writeRecord); when that fails, it
// writes each half on its own, down to single jobs, while ctx lasts: one
// link that cannot be published, or one failure record that cannot be
// written, then sends back only the outcomes that carry it, not the whole
// batch (under 1-in-50 faults a 10,000-page crawl fetched 1,361 to 2,915
// pages twice when a failure sent back its batch). What a failed attempt
// did write stays written and is skipped by the next: links published are
// marked queued, and a failure record is merged with itself. At most
// 2n-1 writes for n jobs.
func (a recorder) writeSplit(ctx context.Context, jobs []recordJob) (done, failed []recordJob, err error) {
	if err = a.writeRecord(ctx, jobs); err == nil {
		return jobs, nil, nil
	}
	if len(jobs) == 1 || ctx.Err() != nil || errors.Is(err, amqp.ErrClosed) {
		// One outcome, no time left, or no channel to RabbitMQ: halves
		// would fail alike.
		return nil, jobs, err
	}
	mid := len(jobs) / 2
	d1, f1, err1 := a.writeSplit(ctx, jobs[:mid])
	d2, f2, err2 := a.writeSplit(ctx, jobs[mid:])
	// New slices: d1 and f1 may be jobs' own, and appending to them would
	// write over jobs (record settles every job of it).
	return slices.Concat(d1, d2), slices.Concat(f1, f2), cmp.Or(err1, err2)
}

// writeRecord writes what settling jobs needs before their acks: their
// links published and marked queued, their failure records, their URLs
// marked done, or their dead-letter messages published (refusedJob): the
// failure record goes first, so a dead-letter publish that fails leaves a
// failure record of a URL that may yet be stored (a record of reason sink
// for a stored page, in that rare case), never a dead-lettered URL with
// no record.
func (a recorder) writeRecord(ctx context.Context, jobs []recordJob) error {
	if err := indexDigests(a.srv.store, a.lineage, jobs); err != nil {
		return fmt.Errorf("seen store (digest index): %w", err)
	}
	if err := a.publishLinks(ctx, jobs); err != nil {
		return err
	}
	keys := make([]seen.Key, 0, len(jobs))
	var fails []failure.Record
	var dead []outMsg
	for _, j := range jobs {
		if j.dead != nil {
			dead = append(dead, *j.dead)
		} else {
			keys = append(keys, j.e.key)
		}
		if j.fail != nil {
			fails = append(fails, *j.fail)
		}
	}
	if err := a.recordFailures(fails); err != nil {
		return err
	}
	if err := a.writeHistory(jobs); err != nil {
		return fmt.Errorf("seen store (fetch history): %w", err)
	}
	if a.revisit.rules != nil {
		if err := a.bumpLastmods(jobs); err != nil {
			return fmt.Errorf("seen store (revisit schedule): %w", err)
		}
	}
	if err := a.writeSchedule(jobs); err != nil {
		return fmt.Errorf("seen store (revisit schedule): %w", err)
	}
	if len(keys) > 0 {
		if err := a.srv.store.MarkDone(a.key, keys); err != nil {
			return fmt.Errorf("seen store: %w", err)
		}
	}
	if len(dead) > 0 {
		if err := a.srv.pub.publish(ctx, dead); err != nil {
			return fmt.Errorf("dead-letter queue: %w", err)
		}
		a.published.Add(int64(len(dead)))
		a.messages.Add(int64(len(dead)))
		for range dead {
			a.settler().countDead(ReasonSink)
		}
		for _, j := range jobs {
			if j.dead != nil && j.fail != nil {
				a.deadLog.write(crawllog.OutcomeDeadLettered, j.e.msg, j.fail.Attempts, ReasonSink, j.fail.LastError)
			}
		}
	}
	return nil
}

// tellRecorded tells the sessions that asked which of their outcomes were
// recorded: every link they carried is queued (or settled as disallowed),
// and their fetchers leave those links out of what they report next.
func tellRecorded(jobs []recordJob) {
	var by map[*fetcherSession][]uint64
	for _, j := range jobs {
		if j.from == nil {
			continue
		}
		if by == nil {
			by = map[*fetcherSession][]uint64{}
		}
		by[j.from] = append(by[j.from], j.lease)
	}
	for s, ids := range by {
		s.trySend(session.FrameRecorded, session.Recorded{Leases: ids})
	}
}

// maxRecording bounds the record goroutines of a campaign. While they run,
// the outcomes that arrive wait in recQueue and go together in the next
// record: one lookup, one publish of all their links (fuller messages:
// each costs RabbitMQ a persistent write, a delivery and an ack whatever
// its size), one MarkDone. The batch grows with the load, with no timer;
// two running let one record's confirm wait overlap the next one's work.
const maxRecording = 2

// queueRecord queues jobs for recording and starts a record when fewer
// than maxRecording run. The queue, while not empty, holds one count of
// pending (the campaign is not drained meanwhile), which the record
// taking it inherits.
func (a recorder) queueRecord(jobs []recordJob) {
	if len(jobs) == 0 {
		return
	}
	if len(a.recQueue) == 0 {
		a.pending.Add(1)
	}
	a.recBacklog.Add(recordWeight(jobs))
	a.recQueue = append(a.recQueue, jobs...)
	a.startRecord()
}

// startRecord hands the queued jobs to a new record goroutine, when fewer
// than maxRecording run. The goroutine, its record done, takes the jobs
// queued meanwhile itself, until none are left: stop waits for it, so what
// was queued before a stop is recorded within its grace. A stopping actor
// starts no goroutine: jobs it could not hand over go back to their queues
// with the channel.
func (a recorder) startRecord() {
	if len(a.recQueue) == 0 || a.recording >= maxRecording {
		return
	}
	jobs := a.recQueue
	a.recQueue = nil
	a.recording++
	if !a.spawn(func(ctx context.Context) {
		for len(jobs) > 0 {
			a.record(ctx, jobs)
			jobs = nil
			if !a.call(func() {
				jobs, a.recQueue = a.recQueue, nil
				if len(jobs) == 0 {
					a.recording--
				}
			}) {
				return
			}
		}
	}) {
		a.recording--
		a.pending.Add(-1)
		a.recBacklog.Add(-recordWeight(jobs))
	}
}

// recordWeight is what jobs weigh against ServerConfig.RecordBacklog: one
// for each job and one for each of its links, which is most of what a job
// holds (a link, its URL, and a message when it is new).
func recordWeight(jobs []recordJob) int64 {
	n := int64(len(jobs))
	for _, j := range jobs {
		n += int64(len(j.links))
	}
	return n
}

// recordBacklogged reports whether the outcomes waiting to be recorded
// weigh more than ServerConfig.RecordBacklog: then the scheduler grants
// no lease until records catch up, rather than hold the pages of fetches
// it cannot record yet. At a crawl's start, when nearly every link is new
// and each record publishes thousands, the queue grew to tens of MB
// (the scheduler's RSS went 95 -> 176 MB for two seconds).
func (a recorder) recordBacklogged() bool {
	return a.recBacklog.Load() > int64(a.srv.cfg.RecordBacklog)
}

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
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

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
	// due, in a continuous campaign, is the URL's next fetch, and undue
	// the entry it replaces (planRevisit), written with its history.
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
func (a *campaignActor) record(ctx context.Context, jobs []recordJob) {
	defer a.pending.Add(-1)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	done, failed, err := a.writeSplit(ctx, jobs)
	a.call(func() {
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
		a.ackEntry(j.e)
	}
	for i, j := range failed {
		if f := betweenNacks.Load(); f != nil && i > 0 {
			(*f)(a.cfg.ID)
		}
		a.nackEntry(j.e)
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
func (a *campaignActor) writeSplit(ctx context.Context, jobs []recordJob) (done, failed []recordJob, err error) {
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
func (a *campaignActor) writeRecord(ctx context.Context, jobs []recordJob) error {
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
	if a.revisits != nil {
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
			a.countDead(ReasonSink)
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
func (a *campaignActor) queueRecord(jobs []recordJob) {
	if len(jobs) == 0 {
		return
	}
	if len(a.recQueue) == 0 {
		a.pending.Add(1)
	}
	a.recQueue = append(a.recQueue, jobs...)
	a.startRecord()
}

// startRecord hands the queued jobs to a new record goroutine, when fewer
// than maxRecording run. The goroutine, its record done, takes the jobs
// queued meanwhile itself, until none are left: stop waits for it, so what
// was queued before a stop is recorded within its grace. A stopping actor
// starts no goroutine: jobs it could not hand over go back to their queues
// with the channel.
func (a *campaignActor) startRecord() {
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
	}
}

// linkPublish is one record's publish of a link, which other records that
// found the same link wait for.
type linkPublish struct {
	done chan struct{}
	err  error // set before done is closed
}

// publishLinks publishes the jobs' links that are not queued yet and
// returns once every one of them is confirmed and marked queued: by this
// call, or by another record's publish of the same link that it waited for
// (and did again itself when that one failed).
func (a *campaignActor) publishLinks(ctx context.Context, jobs []recordJob) error {
	keys, cands, robotsKeys, robotsURLs := a.linkCandidates(jobs)
	if err := a.recordDisallowed(robotsKeys, robotsURLs); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	queued, err := a.srv.store.Queued(a.key, keys)
	if err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	// A link is encoded only once the lookup says it is new: most of a
	// page's links are queued already (the host key, the policy and the
	// JSON of every link were a few % of the scheduler's CPU).
	msgs := make([]shardURL, len(keys))
	for i, c := range cands {
		if !queued[i] {
			msgs[i] = a.linkMessage(c)
		}
	}
	var mine []int
	var mineW []*linkPublish
	type other struct {
		i int
		w *linkPublish
	}
	var others []other
	a.publishingMu.Lock()
	for i := range msgs {
		if queued[i] {
			continue
		}
		if w := a.publishing[keys[i]]; w != nil {
			others = append(others, other{i, w})
			continue
		}
		w := &linkPublish{done: make(chan struct{})}
		a.publishing[keys[i]] = w
		mine = append(mine, i)
		mineW = append(mineW, w)
	}
	a.publishingMu.Unlock()
	fresh, err := a.stillNew(keys, mine)
	if err == nil {
		err = a.publishSome(ctx, keys, msgs, fresh)
	}
	a.publishingMu.Lock()
	for n, i := range mine {
		delete(a.publishing, keys[i])
		mineW[n].err = err
		close(mineW[n].done)
	}
	a.publishingMu.Unlock()
	if err != nil {
		return err
	}
	var again []int
	for _, o := range others {
		select {
		case <-o.w.done:
		case <-ctx.Done():
			return fmt.Errorf("waiting for a link's publish: %w", ctx.Err())
		}
		if o.w.err != nil {
			again = append(again, o.i)
		}
	}
	return a.publishSome(ctx, keys, msgs, again)
}

// stillNew returns the links of mine (indexes into keys) that are still
// not queued, once this record has claimed them. Another record may have
// published one of them, marked it queued and dropped its claim between
// this record's lookup and its claim: the lookup again, after the claim,
// sees that mark (a record marks before it drops a claim), so a link
// found by two pages is published once (TestHoleLinkFoundTwicePublishedOnce).
// A link published meanwhile is still claimed by this record until it
// returns; its waiters see its publish succeed.
func (a *campaignActor) stillNew(keys []seen.Key, mine []int) ([]int, error) {
	if len(mine) == 0 {
		return nil, nil
	}
	ks := make([]seen.Key, len(mine))
	for n, i := range mine {
		ks[n] = keys[i]
	}
	queued, err := a.srv.store.Queued(a.key, ks)
	if err != nil {
		return nil, fmt.Errorf("seen store: %w", err)
	}
	var out []int
	for n, i := range mine {
		if !queued[n] {
			out = append(out, i)
		}
	}
	return out, nil
}

// linkCand is a link of a recorded page, found new or not by the seen
// store before it is encoded.
type linkCand struct {
	link   urlrule.Link
	host   string
	depth  int
	parent string
	path   string // the link's hop path
}

// linkCandidates collects the links of jobs, once each, apart from those
// robots.txt forbids; a link with no host, or that a live exclude
// matches, is never published.
func (a *campaignActor) linkCandidates(jobs []recordJob) (keys []seen.Key, cands []linkCand, robotsKeys []seen.Key, robotsURLs []urlMsg) {
	collected := map[seen.Key]bool{}
	live := a.live.Load()
	for _, j := range jobs {
		for _, l := range j.links {
			if live.excluded(l.URL) != "" {
				continue // out of scope since an operator's exclude
			}
			k := seen.KeyOf(l.URL)
			if collected[k] {
				continue
			}
			collected[k] = true
			if j.disallowed[l.URL] {
				robotsKeys, robotsURLs = append(robotsKeys, k), append(robotsURLs, urlMsg{URL: l.URL, Parent: j.e.msg.URL, Path: l.HopPath(j.e.msg.Path)})
				continue
			}
			host, err := urlrule.HostKey(l.URL)
			if err != nil {
				continue
			}
			keys = append(keys, k)
			cands = append(cands, linkCand{link: l, host: host, depth: l.Depth(j.e.msg.Depth), parent: j.e.msg.URL, path: l.HopPath(j.e.msg.Path)})
		}
	}
	return keys, cands, robotsKeys, robotsURLs
}

// linkMessage is a new link for its shard, at its policy's priority.
func (a *campaignActor) linkMessage(c linkCand) shardURL {
	l := c.link
	m := urlMsg{URL: l.URL, Depth: c.depth, Hops: l.Hops, Embeds: l.Embeds, Parent: c.parent, Score: l.Score, Path: c.path}
	prio := a.policy.Priority(Item{URL: l.URL, Host: c.host, Depth: c.depth, Embed: l.Embeds > 0, Score: l.Score})
	return shardURL{queue: a.topo.Shard(ShardOf(a.clockKey(c.host))), host: c.host, m: m, level: priorityLevel(prio)}
}

// recordDisallowed records the links robots.txt forbids that are not
// queued or recorded yet, and marks them queued, so that the next page that
// links to them finds them settled; each has its crawl log line.
func (a *campaignActor) recordDisallowed(keys []seen.Key, urls []urlMsg) error {
	if len(keys) == 0 {
		return nil
	}
	queued, err := a.srv.store.Queued(a.key, keys)
	if err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	now := time.Now()
	var fs []failure.Record
	var ks []seen.Key
	var ms []urlMsg
	for i, k := range keys {
		if queued[i] {
			continue
		}
		fs = append(fs, failure.Record{URL: urls[i].URL, Reason: ReasonRobots, LastError: "disallowed by robots.txt", First: now, Last: now})
		ks = append(ks, k)
		ms = append(ms, urls[i])
	}
	if len(ks) == 0 {
		return nil
	}
	if err := a.recordFailures(fs); err != nil {
		return err
	}
	if err := a.srv.store.MarkQueued(a.key, ks); err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	a.robotsDropped.Add(int64(len(ks)))
	for _, m := range ms {
		a.countReason(ReasonRobots)
		a.deadLog.write(crawllog.OutcomeDropped, m, 0, ReasonRobots, "disallowed by robots.txt")
	}
	return nil
}

// publishSome publishes msgs[i] for each i in idx, in batches of up to
// the scheduler's Batch URLs per message, confirmed, and marks their keys
// queued.
func (a *campaignActor) publishSome(ctx context.Context, keys []seen.Key, msgs []shardURL, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	us := make([]shardURL, len(idx))
	ks := make([]seen.Key, len(idx))
	for n, i := range idx {
		us[n], ks[n] = msgs[i], keys[i]
	}
	out := batchMessages(us, a.srv.cfg.Batch)
	if err := a.srv.pub.publish(ctx, out); err != nil {
		return err
	}
	a.published.Add(int64(len(us)))
	a.discovered.Add(int64(len(us)))
	a.messages.Add(int64(len(out)))
	if err := a.srv.store.MarkQueued(a.key, ks); err != nil {
		return fmt.Errorf("seen store: %w", err)
	}
	return nil
}

// park re-publishes e's URL to the parking queue that fits wait
// (confirmed), then acks its delivery.
//
// A retry (reason given) that reaches MaxAttempts is dead-lettered
// instead, with its reason.
func (a *campaignActor) park(e *entry, wait time.Duration, attempt, lost int, reason, why string) {
	if attempt >= a.cfg.MaxAttempts && reason != "" {
		a.deadLetter(e, reason, fmt.Sprintf("gave up after %d attempts: %s", attempt, why))
		return
	}
	i := parkFor(wait)
	if reason == "" && why == "" {
		// A plain park (a host too far behind): parked with the others of
		// this turn of the loop, several URLs to a message (flushParks).
		a.parked = append(a.parked, parkReq{e: e, queue: i, attempt: attempt, lost: lost})
		return
	}
	hdr := amqp.Table{hdrAttempt: int32(attempt), hdrLost: int32(lost), hdrSinkFails: int32(e.sinkFails)}
	if why != "" {
		hdr[hdrError] = why
	}
	hdr[hdrPark] = a.parks.owe(i, time.Now())
	// A parked URL comes back at the lowest priority: a slow host's
	// backlog must not come back ahead of the other hosts of its shard.
	msg := outMsg{exchange: a.topo.Park(i), key: a.topo.Shard(e.shard), msg: encodeMsg(e.msg, 0, hdr)}
	a.repost(e, msg, nil)
}

// parkReq is a plain park waiting for flushParks.
type parkReq struct {
	e             *entry
	queue         int // parkFor's index
	attempt, lost int
}

// flushParks publishes the plain parks of the loop's last turn: those
// that go to one park queue, for one shard, with the same counts, share a
// message of up to the scheduler's Batch URLs: a slow host's backlog is
// parked in a few messages rather than one per URL (each a publish, a
// confirm, and later a delivery and an ack). Each URL's delivery is acked once its message is confirmed, or nacked
// back when the publish fails; a parked message comes back with its
// counts, which apply to each of its URLs (onDelivery).
func (a *campaignActor) flushParks() {
	if len(a.parked) == 0 {
		return
	}
	type group struct{ queue, shard, attempt, lost, sinkFails int }
	var order []group
	by := map[group][]*entry{}
	for _, p := range a.parked {
		g := group{p.queue, p.e.shard, p.attempt, p.lost, p.e.sinkFails}
		if _, ok := by[g]; !ok {
			order = append(order, g)
		}
		by[g] = append(by[g], p.e)
	}
	clear(a.parked)
	a.parked = a.parked[:0]
	size := max(a.srv.cfg.Batch, 1)
	now := time.Now()
	for _, g := range order {
		hdr := func() amqp.Table {
			return amqp.Table{hdrAttempt: int32(g.attempt), hdrLost: int32(g.lost), hdrSinkFails: int32(g.sinkFails), hdrPark: a.parks.owe(g.queue, now)}
		}
		for es := by[g]; len(es) > 0; {
			n := min(len(es), size)
			ms := make([]urlMsg, n)
			for i, e := range es[:n] {
				ms[i] = e.msg
			}
			// A parked URL comes back at the lowest priority: a slow
			// host's backlog must not come back ahead of the other hosts
			// of its shard.
			msg := outMsg{exchange: a.topo.Park(g.queue), key: a.topo.Shard(g.shard), msg: encodeParked(ms, hdr())}
			a.repostAll(es[:n], msg, nil, nil)
			es = es[n:]
		}
	}
}

// deadLetter moves a URL to the dead-letter queue with its reason and
// error, and records it as a failure (for `starter failures`) before its
// delivery is acked.
func (a *campaignActor) deadLetter(e *entry, reason, why string) {
	msg, fail := a.deadMessage(e, reason, why)
	reason = orOther(reason)
	m, attempts, unread := e.msg, e.attempt, e.unread
	a.repostAll([]*entry{e}, msg, fail, func() {
		a.countDead(reason)
		if !unread {
			a.deadLog.write(crawllog.OutcomeDeadLettered, m, attempts, reason, why)
		}
	})
}

// countDead counts a URL dead-lettered with reason, once its message is
// in the dead-letter queue: a dead-lettering that fails is not counted
// (the URL comes back, and may be dead-lettered again).
func (a *campaignActor) countDead(reason string) {
	a.deadLtrd.Add(1)
	a.srv.m().deadLetter(a.cfg.ID, reason)
	a.countReason(reason)
}

// deadMessage is e's message for the dead-letter queue with reason and
// why, and its failure record (nil for a URL that could not be read).
func (a *campaignActor) deadMessage(e *entry, reason, why string) (outMsg, *failure.Record) {
	reason = orOther(reason)
	a.log.Warn("dead-lettering", "url", e.msg.URL, "reason", reason, "err", why)
	hdr := amqp.Table{hdrError: why, hdrReason: reason, hdrAttempt: int32(e.attempt)}
	pub := encodeMsg(e.msg, 0, hdr)
	if e.unread {
		if n, ok := e.dl.raw.Headers[hdrBatch]; ok {
			hdr[hdrBatch] = n
		}
		pub = amqp.Publishing{ContentType: e.dl.raw.ContentType, Body: e.dl.raw.Body, Headers: hdr}
	}
	now := time.Now()
	var fail *failure.Record
	if e.msg.URL != "" {
		fail = &failure.Record{URL: e.msg.URL, Reason: reason, Attempts: e.attempt, LastError: why, First: now, Last: now}
	}
	return outMsg{key: a.topo.Dead(), msg: pub}, fail
}

// repost publishes msg (confirmed) and then acks e's delivery, in a
// goroutine; if the publish fails, the delivery goes back to its queue.
func (a *campaignActor) repost(e *entry, msg outMsg, fail *failure.Record) {
	a.repostAll([]*entry{e}, msg, fail, nil)
}

// repostAll is repost for the URLs of one message (fail, when set, is
// recorded after the publish): each is acked once the message is
// confirmed (after done, when set, is called), or all go back to their
// queues.
func (a *campaignActor) repostAll(es []*entry, msg outMsg, fail *failure.Record, done func()) {
	a.pending.Add(1)
	ok := a.spawn(func(ctx context.Context) {
		defer a.pending.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err := a.srv.pub.publish(ctx, []outMsg{msg})
		if err != nil {
			a.parks.settle(msg.msg.Headers) // a park not published is not owed
		}
		if err == nil && fail != nil {
			err = a.recordFailures([]failure.Record{*fail})
		}
		if err != nil {
			a.recordFailed.Add(int64(len(es)))
			a.log.Error("re-publish failed; the URLs go back to their queue", "urls", len(es), "url", es[0].msg.URL, "err", err)
			for _, e := range es {
				a.nackEntry(e)
			}
			return
		}
		a.published.Add(int64(len(es)))
		a.messages.Add(1)
		if done != nil {
			done()
		}
		for _, e := range es {
			e.dl.moved.Store(true)
			a.ackEntry(e)
		}
	})
	if !ok {
		a.pending.Add(-1) // stopping: the deliveries go back with the channel
	}
}

// dropRecorded settles a URL dropped on purpose (robots.txt disallows it):
// its failure is recorded, then its delivery acked; if the record fails,
// the delivery goes back and the URL is dropped again later.
func (a *campaignActor) dropRecorded(e *entry, reason, why string) {
	a.countReason(reason)
	now := time.Now()
	fail := failure.Record{URL: e.msg.URL, Reason: reason, Attempts: e.attempt, LastError: why, First: now, Last: now}
	m := e.msg
	a.pending.Add(1)
	ok := a.spawn(func(context.Context) {
		defer a.pending.Add(-1)
		if err := a.recordFailures([]failure.Record{fail}); err != nil {
			a.recordFailed.Add(1)
			a.log.Error("recording a dropped URL failed; it goes back to its queue", "url", m.URL, "err", err)
			a.nackEntry(e)
			return
		}
		a.deadLog.write(crawllog.OutcomeDropped, m, fail.Attempts, reason, why)
		a.ackEntry(e)
	})
	if !ok {
		a.pending.Add(-1)
	}
}

// ackEntry settles e: its outcome is recorded, it was re-published
// elsewhere (confirmed), or it was dropped on purpose.
func (a *campaignActor) ackEntry(e *entry) { a.settleEntry(e, false) }

// nackEntry settles e as not done: its message goes back to its queue
// (whole, with the other URLs of its batch, which are then found done).
func (a *campaignActor) nackEntry(e *entry) { a.settleEntry(e, true) }

// voidEntry settles e whose channel is gone (RabbitMQ requeued its message).
func (a *campaignActor) voidEntry(e *entry) {
	e.dl.void.Store(true)
	a.settleEntry(e, false)
}

// sendBack settles a message some of whose URLs moved to another queue
// (parked, dead-lettered: confirmed there) while others asked to go back:
// nacked whole, it would bring the moved ones back too, a parked URL twice
// and a dead-lettered one to be fetched again with its attempts reset. The
// URLs that asked to go back are published to their shard queue alone
// (confirmed, with their counts), then the message is acked. If that
// publish fails, the message is nacked back whole after all: a URL twice
// is better than a URL lost.
func (a *campaignActor) sendBack(dl *delivery) {
	dl.backMu.Lock()
	back := dl.back
	dl.back = nil
	dl.backMu.Unlock()
	msgs := make([]outMsg, 0, len(back))
	for _, e := range back {
		hdr := amqp.Table{hdrAttempt: int32(e.attempt), hdrLost: int32(e.lost), hdrSinkFails: int32(e.sinkFails)}
		msgs = append(msgs, outMsg{key: a.topo.Shard(e.shard), msg: encodeMsg(e.msg, priorityLevel(e.prio), hdr)})
	}
	settled := func() {
		a.unacked.Add(-1)
		a.acked.Add(1)
	}
	a.pending.Add(1)
	ok := a.spawn(func(ctx context.Context) {
		defer a.pending.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		var err error
		if perr := a.srv.pub.publish(ctx, msgs); perr != nil {
			a.log.Error("sending back the URLs of a message failed; it goes back whole", "urls", len(back), "url", back[0].msg.URL, "err", perr)
			err = dl.Nack(false, true)
		} else {
			a.published.Add(int64(len(msgs)))
			a.messages.Add(int64(len(msgs)))
			err = dl.Ack(false)
		}
		if err != nil {
			a.ackFailed.Add(1)
			a.log.Warn("ack failed; the message comes back", "url", back[0].msg.URL, "err", err)
		}
		settled()
	})
	if !ok {
		// Stopping: the channel closes, and RabbitMQ requeues the message.
		a.pending.Add(-1)
		settled()
	}
}

// settleEntry counts e settled, once, whoever gets there first; the last
// URL of a message acks it, or nacks it back to its queue when one of its
// URLs asked to (requeue). Stats' Held counts URLs: the message's last
// count goes only after its ack, so none held means none unacked.
func (a *campaignActor) settleEntry(e *entry, requeue bool) {
	if !e.settled.CompareAndSwap(false, true) {
		return
	}
	dl := e.dl
	if requeue {
		dl.backMu.Lock()
		dl.back = append(dl.back, e)
		dl.backMu.Unlock()
		dl.requeue.Store(true)
	}
	if dl.left.Add(-1) > 0 {
		a.unacked.Add(-1)
		return
	}
	if !dl.void.Load() && dl.requeue.Load() && dl.moved.Load() {
		a.sendBack(dl)
		return
	}
	if !dl.void.Load() {
		var err error
		if dl.requeue.Load() {
			err = dl.Nack(false, true)
		} else {
			err = dl.Ack(false)
		}
		if err != nil {
			// Its channel is gone: RabbitMQ requeued it, and the redelivery
			// is seen as done (or fetched again).
			a.ackFailed.Add(1)
			a.log.Warn("ack failed; the message comes back", "url", e.msg.URL, "err", err)
		}
	}
	a.unacked.Add(-1)
	a.acked.Add(1)
}

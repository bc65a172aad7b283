// Continuous campaigns: a URL that a revisit rule fits is fetched again
// at its next-fetch time. The schedule lives in the seen store, beside
// the URL's history, one entry per URL keyed by its time; RabbitMQ holds
// only what is due within the next poll.
//
// The chain that loses no URL: the entry of a URL's next fetch is written
// (synced) with its history, before its done mark and the ack of the
// delivery that fetched it. The release loop publishes the entries that
// are due to their shard queues (confirmed), then deletes them. A crash in
// between publishes an entry twice: the second copy finds, in the URL's
// history, a fetch at or after its time, and is acked as a duplicate.

package frontier

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// now is the scheduler's time for revisits (ServerConfig.Clock).
func (s *Server) now() time.Time {
	if s.cfg.Clock != nil {
		return s.cfg.Clock()
	}
	return time.Now()
}

// revisitSchedule is a continuous campaign's revisit rules (nil: the
// campaign is not continuous; they never change) and what its schedule
// held at its last count, for the stats, in atomics: the release loop, the
// record goroutines and Stats share them.
type revisitSchedule struct {
	rules                        *campaign.Revisits
	scheduled, nextDue           atomic.Int64
	revisited, scheduleE, bumped atomic.Int64
	// stop closes when the actor stops: the release loop ends.
	stop chan struct{}
}

// releaser is the campaign's actor seen from its revisit schedule: the
// release loop (releaseDue and what it calls, on a goroutine of its own,
// which reads of the actor only what never changes, its atomics and the
// seen store) and revisitDuplicate, which the actor's goroutine asks of
// each URL released.
type releaser struct{ *campaignActor }

// releaser returns a's releaser.
func (a *campaignActor) releaser() releaser { return releaser{a} }

// plan, for a URL of a continuous campaign that a rule fits, fetched
// now, sets j's history to carry the URL's next fetch and j's schedule
// entry for it (replacing the one the URL had). A page that changed since
// its last fetch comes back sooner, one that did not later
// (campaign.RevisitRule.Next). A fetch without a capture (a failure) keeps
// the capture and links the history had. It reports whether a rule fit
// (and so whether j's history is set).
func (r *revisitSchedule) plan(j *recordJob, o session.Outcome, now time.Time) bool {
	rule := r.rules.For(j.e.msg.URL, j.e.msg.Depth, o.MIME)
	if rule == nil {
		return false
	}
	var prev decodedHistory
	if j.e.history != nil {
		// Unreadable: no history, the URL starts at the rule's minimum.
		prev, _ = decodeHistory(j.e.history, o.Capture == nil)
	}
	changed := o.Capture != nil && o.Unchanged == ""
	interval := rule.Next(prev.revisit.Interval, changed)
	rs := revisitState{Interval: interval, Due: now.Add(interval), Fetched: now}
	capture, links := o.Capture, o.Links
	if capture == nil {
		capture, links = prev.capture, prev.links
	}
	if capture == nil {
		capture = &page.Capture{Status: o.Status}
	}
	j.history = encodeHistory(capture, links, rs)
	m := j.e.msg
	m.Revisit = rs.Due.UnixNano()
	body, _ := json.Marshal(m) // a struct of strings and numbers always encodes
	j.due = &seen.Due{Key: j.e.key, At: rs.Due, Msg: body}
	if !prev.revisit.Due.IsZero() {
		j.undue = &seen.Due{Key: j.e.key, At: prev.revisit.Due}
	}
	return true
}

// writeSchedule stores the schedule entries of jobs, and deletes those
// they replace, in one synced write: before the URLs are marked done, as
// their histories.
func (a recorder) writeSchedule(jobs []recordJob) error {
	var add, remove []seen.Due
	for _, j := range jobs {
		if j.due != nil {
			add = append(add, *j.due)
		}
		if j.undue != nil {
			remove = append(remove, *j.undue)
		}
	}
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	return a.srv.store.Schedule(a.key, add, remove)
}

// bumpLastmods, in a continuous campaign, brings forward the next fetch
// of each URL a sitemap of jobs lists with a <lastmod> after that URL's
// last fetch: to the rule's minimum interval after the last fetch, or now
// when that has passed. The URL's history must be on this scheduler (its
// host's shard is consumed here); a URL the campaign never fetched is a
// new link, queued as any other. The entry is written before the history
// that names it: a crash between the two leaves two entries, and the
// fetch of the first deletes the other (the one its history names).
func (a recorder) bumpLastmods(jobs []recordJob) error {
	now := a.srv.now()
	var add, remove []seen.Due
	var keys []seen.Key
	var hists [][]byte
	for _, j := range jobs {
		for _, l := range j.links {
			if l.LastMod.IsZero() {
				continue
			}
			bump, err := a.bumpOf(l, now)
			if err != nil {
				return err
			}
			if bump != nil {
				add, remove = append(add, bump.add), append(remove, bump.remove)
				keys, hists = append(keys, bump.add.Key), append(hists, bump.history)
			}
		}
	}
	if len(add) == 0 {
		return nil
	}
	// One synced write for the record's entries, then their histories: a
	// sitemap of 50,000 URLs costs two writes, not 50,000 fsyncs.
	if err := a.srv.store.Schedule(a.key, add, remove); err != nil {
		return err
	}
	if err := a.srv.store.SetHistory(a.lineage, keys, hists); err != nil {
		return err
	}
	a.revisit.bumped.Add(int64(len(add)))
	for _, d := range add {
		if n := a.revisit.nextDue.Load(); n == 0 || d.At.UnixNano() < n {
			a.revisit.nextDue.Store(d.At.UnixNano()) // until the next count
		}
	}
	return nil
}

// lastmodBump is one URL's entry brought forward, the entry it replaces,
// and its history naming the new one.
type lastmodBump struct {
	add, remove seen.Due
	history     []byte
}

// bumpOf is the bump a sitemap's link l asks for, nil when none: the URL
// has no history here, no entry in this campaign's schedule, no rule, or
// a next fetch sooner already. The entry keeps its message (the depth,
// parent and path the URL was queued with, by which its rule is found):
// only its time moves.
func (a recorder) bumpOf(l urlrule.Link, now time.Time) (*lastmodBump, error) {
	k := seen.KeyOf(l.URL)
	b, err := a.srv.store.History(a.lineage, k)
	if err != nil || b == nil {
		return nil, err
	}
	d, err := decodeHistory(b, true)
	if err != nil || d.revisit.Due.IsZero() || !l.LastMod.After(d.revisit.Fetched) {
		return nil, nil
	}
	body, err := a.srv.store.Entry(a.key, d.revisit.Due, k)
	if err != nil || body == nil {
		return nil, err // released already (its fetch comes), or another run's
	}
	var m urlMsg
	if json.Unmarshal(body, &m) != nil {
		return nil, nil
	}
	rule := a.revisit.rules.For(l.URL, m.Depth, "text/html")
	if rule == nil {
		rule = a.revisit.rules.For(l.URL, m.Depth, "")
	}
	if rule == nil {
		return nil, nil
	}
	due := maxTime(now, d.revisit.Fetched.Add(rule.Min))
	if !due.Before(d.revisit.Due) {
		return nil, nil
	}
	m.Revisit = due.UnixNano()
	body, _ = json.Marshal(m) // a struct of strings and numbers always encodes
	old := d.revisit.Due
	d.revisit.Due = due
	return &lastmodBump{
		add:     seen.Due{Key: k, At: due, Msg: body},
		remove:  seen.Due{Key: k, At: old},
		history: encodeHistory(d.capture, d.links, d.revisit),
	}, nil
}

// revisitDuplicate reports whether a URL back from the revisit schedule
// was fetched at or after its time already: a second copy of its
// message (a release that published it, then died before deleting its
// entry). A history that cannot be read is no fetch: the URL is fetched.
func (a releaser) revisitDuplicate(k seen.Key, due int64) bool {
	b, err := a.srv.store.History(a.lineage, k)
	if err != nil || b == nil {
		return false
	}
	d, err := decodeHistory(b, false)
	return err == nil && !d.revisit.Fetched.IsZero() && d.revisit.Fetched.UnixNano() >= due
}

// revisitBatch bounds the entries one release reads and publishes.
const revisitBatch = 2000

// releaseDue is a continuous campaign's release loop: every RevisitPoll,
// while fetchers are connected (a paused campaign has none), the URLs due
// within the next poll go to their shard queues, confirmed, and their
// entries are deleted. It also counts the schedule for the stats.
func (a releaser) releaseDue(ctx context.Context) {
	poll := a.srv.cfg.RevisitPoll
	tick := time.NewTicker(poll)
	defer tick.Stop()
	var counted time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.revisit.stop:
			return
		case <-tick.C:
		}
		if time.Since(counted) >= min(10*poll, 10*time.Second) {
			a.countSchedule()
			counted = time.Now()
		}
		if a.nsessions.Load() == 0 {
			continue
		}
		for {
			n, err := a.releaseSome(ctx, a.srv.now().Add(poll))
			if err != nil {
				a.revisit.scheduleE.Add(1)
				a.log.Error("releasing the URLs due again failed; they stay scheduled and are tried again next poll", "err", err)
				break
			}
			if n < revisitBatch {
				break
			}
		}
	}
}

// releaseSome publishes up to revisitBatch entries due by t and deletes
// them; it returns how many.
func (a releaser) releaseSome(ctx context.Context, t time.Time) (int, error) {
	due, err := a.srv.store.DueBy(a.key, t, revisitBatch)
	if err != nil || len(due) == 0 {
		return 0, err
	}
	us := make([]shardURL, 0, len(due))
	for _, d := range due {
		m, err := decodeMsg(d.Msg)
		if err != nil {
			a.log.Error("an unreadable revisit entry is dropped", "err", err)
			continue
		}
		host, err := urlrule.HostKey(m.URL)
		if err != nil {
			a.log.Error("a revisit entry of an unparseable URL is dropped", "url", m.URL, "err", err)
			continue
		}
		prio := a.policy.Priority(Item{URL: m.URL, Host: host, Depth: m.Depth, Embed: m.Embeds > 0, Score: m.Score})
		us = append(us, shardURL{queue: a.topo.Shard(ShardOf(a.clockKey(host))), host: host, m: m, level: priorityLevel(prio)})
	}
	if len(us) > 0 {
		out := batchMessages(us, a.srv.cfg.Batch)
		pctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := a.srv.pub.publish(pctx, out)
		cancel()
		if err != nil {
			return 0, err
		}
		a.published.Add(int64(len(us)))
		a.messages.Add(int64(len(out)))
		a.revisit.revisited.Add(int64(len(us)))
	}
	if err := a.srv.store.Schedule(a.key, nil, due); err != nil {
		return 0, err
	}
	a.revisit.scheduled.Add(-int64(len(due)))
	return len(due), nil
}

// countSchedule reads how many URLs the schedule holds and when the first
// is due, for the stats.
func (a releaser) countSchedule() {
	n, next, err := a.srv.store.Scheduled(a.key)
	if err != nil {
		a.log.Warn("counting the revisit schedule", "err", err)
		return
	}
	a.revisit.scheduled.Store(n)
	a.revisit.nextDue.Store(unixNano(next))
}

// stats fills the stats of a continuous campaign.
func (r *revisitSchedule) stats(s *session.Stats) {
	if r.rules == nil {
		return
	}
	s.Continuous = true
	s.Scheduled = r.scheduled.Load()
	s.Revisited = r.revisited.Load()
	s.Bumped = r.bumped.Load()
	s.ReleaseErrors = r.scheduleE.Load()
	if n := r.nextDue.Load(); n != 0 {
		s.NextDue = time.Unix(0, n).UTC()
	}
}

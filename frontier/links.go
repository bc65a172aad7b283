// A record's links: those not yet seen are published to their shards,
// confirmed, and marked queued, before the page's URL is marked done;
// records that found the same link wait for one publish of it.

package frontier

import (
	"context"
	"fmt"
	"time"

	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/urlrule"
)

// linkPublish is one record's publish of the links it claimed, which
// other records that found one of the same links wait for.
type linkPublish struct {
	done chan struct{}
	err  error // set before done is closed
}

// publishLinks publishes the jobs' links that are not queued yet and
// returns once every one of them is confirmed and marked queued: by this
// call, or by another record's publish of the same link that it waited for
// (and did again itself when that one failed).
func (a recorder) publishLinks(ctx context.Context, jobs []recordJob) error {
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
	msgs := a.newLinkMessages(cands, queued)
	// One publish stands for all the links this record claims: they are
	// published together and succeed or fail together, and a channel per
	// link was a tenth of the scheduler's live heap at a crawl's start,
	// when most links are new.
	var mine []int
	var pub *linkPublish
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
		if pub == nil {
			pub = &linkPublish{done: make(chan struct{})}
		}
		a.publishing[keys[i]] = pub
		mine = append(mine, i)
	}
	a.publishingMu.Unlock()
	fresh, err := a.stillNew(keys, mine)
	if err == nil {
		err = a.publishSome(ctx, keys, msgs, fresh)
	}
	if pub != nil {
		a.publishingMu.Lock()
		for _, i := range mine {
			delete(a.publishing, keys[i])
		}
		pub.err = err
		close(pub.done)
		a.publishingMu.Unlock()
	}
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
func (a recorder) stillNew(keys []seen.Key, mine []int) ([]int, error) {
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
// store before it is encoded. It points into the record's jobs: the
// scheduler makes one for every link of every page it records, most of
// them queued already, and the copies they were (120 bytes, in slices
// grown by doubling) were a third of the scheduler's allocations on a
// million-page crawl.
type linkCand struct {
	link *urlrule.Link
	job  *recordJob
	host string
}

// linkCandidates collects the links of jobs, once each, apart from those
// robots.txt forbids; a link with no host, or that a live exclude
// matches, is never published.
func (a recorder) linkCandidates(jobs []recordJob) (keys []seen.Key, cands []linkCand, robotsKeys []seen.Key, robotsURLs []urlMsg) {
	n := 0
	for _, j := range jobs {
		n += len(j.links)
	}
	collected := make(map[seen.Key]struct{}, n)
	keys, cands = make([]seen.Key, 0, n), make([]linkCand, 0, n)
	live := a.live.Load()
	for ji := range jobs {
		j := &jobs[ji]
		for li := range j.links {
			l := &j.links[li]
			if live.excluded(l.URL) != "" {
				continue // out of scope since an operator's exclude
			}
			k := seen.KeyOf(l.URL)
			if _, ok := collected[k]; ok {
				continue
			}
			collected[k] = struct{}{}
			if j.disallowed[l.URL] {
				robotsKeys, robotsURLs = append(robotsKeys, k), append(robotsURLs, urlMsg{URL: l.URL, Parent: j.e.msg.URL, Path: l.HopPath(j.e.msg.Path)})
				continue
			}
			host, err := urlrule.HostKey(l.URL)
			if err != nil {
				continue
			}
			keys = append(keys, k)
			cands = append(cands, linkCand{link: l, job: j, host: host})
		}
	}
	return keys, cands, robotsKeys, robotsURLs
}

// newLinkMessages returns, by the links' index in cands, the message of
// each link not queued and nil for the others. The messages are made in
// one slice, sized once.
func (a recorder) newLinkMessages(cands []linkCand, queued []bool) []*shardURL {
	n := 0
	for _, q := range queued {
		if !q {
			n++
		}
	}
	made := make([]shardURL, 0, n)
	msgs := make([]*shardURL, len(cands))
	for i, c := range cands {
		if !queued[i] {
			made = append(made, a.linkMessage(c))
			msgs[i] = &made[len(made)-1]
		}
	}
	return msgs
}

// linkMessage is a new link for its shard, at its policy's priority.
func (a recorder) linkMessage(c linkCand) shardURL {
	l, from := c.link, c.job.e.msg
	depth := l.Depth(from.Depth)
	m := urlMsg{URL: l.URL, Depth: depth, Hops: l.Hops, Embeds: l.Embeds, Parent: from.URL, Score: l.Score, Path: l.HopPath(from.Path)}
	prio := a.policy.Priority(Item{URL: l.URL, Host: c.host, Depth: depth, Embed: l.Embeds > 0, Score: l.Score})
	return shardURL{queue: a.topo.Shard(ShardOf(a.clockKey(c.host))), host: c.host, m: m, level: priorityLevel(prio)}
}

// recordDisallowed records the links robots.txt forbids that are not
// queued or recorded yet, and marks them queued, so that the next page that
// links to them finds them settled; each has its crawl log line.
func (a recorder) recordDisallowed(keys []seen.Key, urls []urlMsg) error {
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
// queued; their URLs go into the URL index first (urllist.go).
func (a recorder) publishSome(ctx context.Context, keys []seen.Key, msgs []*shardURL, idx []int) error {
	if len(idx) == 0 {
		return nil
	}
	us := make([]shardURL, len(idx))
	ks := make([]seen.Key, len(idx))
	for n, i := range idx {
		us[n], ks[n] = *msgs[i], keys[i]
	}
	// Indexed before the publish: a URL indexed and not published is
	// listed by no state (it has no queued mark), and the retry of a
	// failed publish indexes it again.
	if err := a.srv.store.IndexURLs(a.key, indexed(us)); err != nil {
		return fmt.Errorf("seen store: %w", err)
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

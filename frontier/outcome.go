// Outcomes: what a fetcher reports for each lease decides the URL's fate
// (record, retry, park, fail its host), on the actor's goroutine; the I/O
// runs in record and repost.

package frontier

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// outcomes is the campaign's actor seen from what its fetchers report:
// each outcome decides its URL's fate (onOutcomes), and a robots.txt its
// host's rules and sitemaps (onRobots). Actor goroutine only, but for
// sitemapsFailed, which the goroutine queueing a robots.txt's sitemaps
// calls (seedSitemaps), and which only counts, records and logs.
type outcomes struct{ *campaignActor }

// outcomes returns a's outcomes.
func (a *campaignActor) outcomes() outcomes { return outcomes{a} }

// onOutcomes handles a batch of outcomes from s. State changes happen here;
// the I/O (publishing links with confirms, marking done, acking) runs in a
// goroutine, so the loop never waits on RabbitMQ.
func (a outcomes) onOutcomes(s *fetcherSession, items []session.Outcome) {
	now := time.Now()
	var rec []recordJob
	for _, o := range items {
		l := a.leases[o.LeaseID]
		if l == nil || l.s != s {
			continue // expired and re-leased: the newer lease's outcome counts
		}
		a.leaser().endLease(l, now)
		h := l.h
		if l.resolve {
			a.ipKeys().onResolved(h, o, now)
			continue
		}
		a.ipKeys().learnIP(h, o.IP)
		if l.e == nil {
			// robots.txt may set a Crawl-delay: apply it before spacing.
			a.onRobots(h, o, now)
		}
		if o.Latency > 0 {
			h.adapt = a.cfg.AdaptiveDelay(o.Latency)
		}
		a.spaceAfter(h, l, o, now)
		if l.e == nil {
			a.settler().trimHost(h, now)
			a.leaser().place(h, now)
			continue
		}
		e := l.e
		if a.held[e.key] != e {
			a.leaser().place(h, now)
			continue // the delivery is void (channel lost); it came again or will
		}
		origin := urlrule.Origin(e.msg.URL)
		if o.Status > 0 {
			h.answered(origin)
		}
		if o.HostDown {
			// Counts against the host's origin, and as an attempt of the
			// URL, so that a URL that always fails on a host that works
			// ends too.
			a.settler().hostDown(h, origin, o.Reason, o.Error, now)
		}
		if j, ok := a.settleOutcome(h, e, o, origin, now); ok {
			if s.recorded {
				j.from, j.lease = s, o.LeaseID
			}
			rec = append(rec, j)
		}
		a.leaser().place(h, now)
		if wait := h.next.Sub(now); wait > holdWindow && len(h.queue) > 0 {
			a.settler().parkHost(h, wait)
		}
	}
	a.recorder().queueRecord(rec)
}

// spaceAfter spaces h's next start after the request o reports. The
// request reached the server no later than its response head, now-Took
// (Took is measured from it; an outcome without Took counts from now),
// whatever the lease's transit: the delay counts from there. The adaptive
// delay counts from the request's start, Latency before the head (and not
// before the lease), so that a host's starts are factor x its response
// time apart, as Heritrix's delayFactor and Scrapy's AutoThrottle space
// them. The shared clock moves by the delay only: the adaptive delay is
// the campaign's own pace.
func (a outcomes) spaceAfter(h *host, l *lease, o session.Outcome, now time.Time) {
	head := now.Add(-o.Took)
	if h.delay > 0 && a.srv.clocks != nil {
		a.ipKeys().reportStart(h, head, now)
	}
	from := maxTime(head.Add(-o.Latency), l.start)
	h.next = maxTime(h.next, maxTime(head.Add(h.delay), from.Add(h.adapt)))
}

// settleOutcome applies the outcome o of e's lease on host h: back to the
// host's queue, a retry, a parking or the dead-letter queue; or, for a
// fetch whose outcome is to be recorded, its record job (true).
func (a outcomes) settleOutcome(h *host, e *entry, o session.Outcome, origin string, now time.Time) (recordJob, bool) {
	switch {
	case o.Released:
		a.srv.m().leaseReturned(a.cfg.ID)
		a.settler().requeue(h, e)
	case o.HostDown && !o.Stored:
		e.attempt++
		switch d := h.downFor(origin); {
		case d != nil:
			delete(a.held, e.key)
			a.settler().deadLetter(e, d.why, d.message(h, origin))
		case e.attempt >= a.cfg.MaxAttempts:
			delete(a.held, e.key)
			a.settler().deadLetter(e, o.Reason, fmt.Sprintf("gave up after %d attempts: %s", e.attempt, o.Error))
		default:
			a.retried.Add(1)
			heap.Push(&h.queue, e)
		}
	case o.SinkFailed:
		// A sink refused the page (the fetcher retried it for a while):
		// put aside without counting a fetch attempt, at most
		// MaxAttempts times, then dead-lettered with the sink's reason;
		// at once when the refusal is for good. A dead-lettered page's
		// links are followed (refusedJob).
		e.sinkFails++
		var why string
		switch {
		case o.SinkRefused:
			why = "a sink refused the page for good: " + o.Error
		case e.sinkFails >= a.cfg.MaxAttempts:
			why = fmt.Sprintf("no sink stored the page after %d tries: %s", e.sinkFails, o.Error)
		}
		if why != "" && len(o.Links) > 0 {
			return a.refusedJob(e, o, why, now), true
		}
		delete(a.held, e.key)
		if why == "" {
			a.settler().park(e, max(o.RetryAfter, retryBackoff(0)), e.attempt, e.lost, "", "")
		} else {
			a.settler().deadLetter(e, ReasonSink, why)
		}
	case o.Backoff || o.Retry:
		if o.Backoff {
			wait := max(o.RetryAfter, 2*h.spacing(), time.Second)
			h.next = maxTime(h.next, now.Add(wait))
		}
		attempt := e.attempt + 1
		a.retried.Add(1)
		wait := max(o.RetryAfter, retryBackoff(attempt))
		delete(a.held, e.key)
		reason := o.Reason
		if reason == "" {
			reason = statusReason(o.Status)
		}
		a.settler().park(e, wait, attempt, e.lost, reason, o.Error)
	default:
		return a.fetchedJob(h, e, o, now), true
	}
	return recordJob{}, false
}

// fetchedJob counts a fetch's outcome (a page, or a permanent failure) and
// returns the job that records it.
func (a outcomes) fetchedJob(h *host, e *entry, o session.Outcome, now time.Time) recordJob {
	h.fetched++
	if o.Unchanged == page.RevisitNotModified {
		o.Links = a.unchangedLinks(e.history)
	}
	a.countLinks(o)
	j := recordJob{e: e, links: o.Links, stored: indexedCapture(&a.cfg, o.Capture, o.Unchanged)}
	if o.Error != "" && o.Status == 0 {
		a.failed.Add(1)
		j.fail = &failure.Record{Reason: orOther(o.Reason), LastError: o.Error}
	} else {
		a.fetched.Add(1)
		if o.Unchanged != "" {
			a.unchanged.Add(1)
		}
		switch {
		case o.Status >= 400:
			j.fail = &failure.Record{Reason: statusReason(o.Status), LastError: o.Error}
		case o.Reason == page.ReasonNotModified:
			j.fail = &failure.Record{Reason: o.Reason, LastError: o.Error}
		}
	}
	if j.fail != nil {
		j.fail.URL, j.fail.Attempts, j.fail.First, j.fail.Last = e.msg.URL, e.attempt+1, now, now
		a.countReason(j.fail.Reason)
	}
	j.disallowed = a.disallowedLinks(o.Links, now)
	// A page a revisit rule fits gets its history with its next fetch;
	// the others the plain one, encoded once either way.
	if a.revisit.rules == nil || !a.revisit.plan(&j, o, a.srv.now()) {
		j.history = a.historyOf(o)
	}
	return j
}

// countLinks counts the links o's page had: those it reports, and those
// its fetcher left out as known (recorded here before).
func (a outcomes) countLinks(o session.Outcome) {
	known := max(o.Known, 0)
	a.srv.m().linksDiscovered(a.cfg.ID, len(o.Links)+known)
	a.srv.m().linksLeftOut(a.cfg.ID, known)
}

// refusedJob is the record job of a page no sink will store: its links
// are queued as any page's are, and the URL, instead of being marked
// done, goes to the dead-letter queue with reason sink (confirmed) before
// its delivery is acked. Without it the pages reachable only through a
// page the sinks refuse were never crawled.
func (a outcomes) refusedJob(e *entry, o session.Outcome, why string, now time.Time) recordJob {
	a.countLinks(o)
	msg, fail := a.settler().deadMessage(e, ReasonSink, why)
	fail.Attempts = e.attempt + 1 // it was fetched: an attempt, as fetchedJob counts
	return recordJob{e: e, links: o.Links, fail: fail, dead: &msg, disallowed: a.disallowedLinks(o.Links, now)}
}

// statusReason is the failure reason of an HTTP status (4xx, 5xx), or
// ReasonOther.
func statusReason(status int) string {
	switch {
	case status >= 400 && status < 500:
		return "4xx"
	case status >= 500 && status < 600:
		return "5xx"
	}
	return ReasonOther
}

func orOther(reason string) string {
	if reason == "" {
		return ReasonOther
	}
	return reason
}

// retryBackoff is the wait before attempt n+1.
func retryBackoff(attempt int) time.Duration {
	d := 5 * time.Second
	for range attempt {
		d *= 4
	}
	return min(d, 10*time.Minute)
}

func (a outcomes) onRobots(h *host, o session.Outcome, now time.Time) {
	var r *urlrule.Robots
	if o.Robots == nil {
		r = urlrule.ParseRobots(0, nil, errors.New(o.Error))
	} else {
		var ferr error
		if o.Robots.Error != "" {
			ferr = errors.New(o.Robots.Error)
		}
		r = a.srv.robots.Parse(o.Robots.Status, o.Robots.Body, ferr)
	}
	h.robots = r
	h.robotsState = robotsReady
	if r.Unreachable {
		// RFC 9309: everything disallowed while robots.txt is unreachable
		// (5xx, 429, network); it counts against the host like any
		// connection failure, and the host fails after HostRetries more.
		reason, why := o.Reason, o.Error
		if o.Robots != nil && o.Robots.Status > 0 {
			reason, why = ReasonRobots, fmt.Sprintf("robots.txt answered %d", o.Robots.Status)
		} else if o.Robots != nil && o.Robots.Error != "" {
			why = o.Robots.Error
		}
		if a.settler().hostDown(h, "", reason, why, now) {
			return
		}
		h.robotsAt = h.next
		if wait := h.robotsAt.Sub(now); wait > holdWindow {
			a.settler().parkHost(h, wait)
		}
		return
	}
	h.answered("")
	h.robotsAt = now.Add(a.srv.cfg.RobotsTTL)
	if cd := r.CrawlDelay(); cd > h.delay {
		h.delay = min(cd, 10*time.Minute)
	}
	if a.cfg.Sitemaps && !h.sitemaps {
		h.sitemaps = true
		a.seedSitemaps(h, r.Sitemaps())
	}
}

// seedSitemaps queues the in-scope sitemaps a host's robots.txt names, as
// links of depth 0; the fetcher reads their <loc> URLs as links.
func (a outcomes) seedSitemaps(h *host, urls []string) {
	var links []urlrule.Link
	for _, raw := range urls {
		s, err := urlrule.Normalize(raw, nil, a.cfg.DropParams)
		if err != nil {
			continue
		}
		if u, err := url.Parse(s); err == nil && a.scope != nil {
			if ok, _ := a.scope.Allow(u, 0, nil); ok {
				links = append(links, urlrule.Link{URL: s})
			}
		}
	}
	if len(links) == 0 {
		return
	}
	robots := &entry{msg: urlMsg{URL: h.root + "/robots.txt", Depth: -1, Path: urlrule.HopPrerequisite}}
	a.pending.Add(1)
	ok := a.spawn(func(ctx context.Context) {
		defer a.pending.Add(-1)
		// robots.txt is no delivery whose ack could wait for these links:
		// the publish is retried here, a bounded number of times, and the
		// pending count keeps the campaign from draining meanwhile. After
		// the last try each sitemap is settled as a failure (recorded, so
		// that `starter failures` lists it), and the host's robots.txt is
		// fetched again with its next page, if it has one: its sitemaps
		// are queued again with it.
		tries, wait := sitemapRetry()
		for try := 1; ; try++ {
			pctx, cancel := context.WithTimeout(ctx, time.Minute)
			err := a.recorder().publishLinks(pctx, []recordJob{{e: robots, links: links}})
			cancel()
			if err == nil {
				return
			}
			if try >= tries || ctx.Err() != nil {
				a.log.Error("queueing sitemaps failed; each is recorded as a failure, and robots.txt is fetched again with the host's next page", "host", h.name, "tries", try, "err", err)
				a.sitemapsFailed(links, try, err)
				a.post(func() {
					h.sitemaps = false
					if h.robotsState == robotsReady {
						h.robotsState = robotsUnknown
					}
				})
				return
			}
			a.log.Warn("queueing sitemaps failed; retrying", "host", h.name, "err", err, "in", wait)
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
			wait = min(2*wait, 30*time.Second)
		}
	})
	if !ok {
		a.pending.Add(-1)
		h.sitemaps = false
	}
}

// sitemapTries bounds the publishes of one robots.txt's sitemaps; the
// first retry waits sitemapWait, doubling up to 30 s.
const (
	sitemapTries = 8
	sitemapWait  = time.Second
)

// sitemapRetryOverride, when set (tests only, through export_test.go),
// replaces sitemapTries and sitemapWait.
var sitemapRetryOverride atomic.Pointer[[2]time.Duration]

func sitemapRetry() (int, time.Duration) {
	if p := sitemapRetryOverride.Load(); p != nil {
		return int(p[0]), p[1]
	}
	return sitemapTries, sitemapWait
}

// sitemapsFailed records the sitemaps a robots.txt named that could not be
// queued, as failures of reason other: settled, and listed by `starter
// failures`, rather than known to a log line only.
func (a outcomes) sitemapsFailed(links []urlrule.Link, tries int, err error) {
	now := time.Now()
	recs := make([]failure.Record, 0, len(links))
	for _, l := range links {
		a.countReason(ReasonOther)
		recs = append(recs, failure.Record{URL: l.URL, Reason: ReasonOther, Attempts: tries,
			LastError: fmt.Sprintf("sitemap not queued after %d tries: %v", tries, err), First: now, Last: now})
	}
	if rerr := a.recordFailures(recs); rerr != nil {
		a.log.Error("recording the sitemaps not queued failed", "sitemaps", len(links), "err", rerr)
	}
}

// disallowedLinks returns the links whose host this scheduler knows the
// robots.txt of, and which it disallows: they are recorded as robots
// failures instead of being published, each a publish, a delivery and an
// ack saved (most of a site's links to a disallowed section are found again
// on every page). A link of a host this scheduler does not hold, or whose
// rules are past their TTL (the host fetches them again before its next
// page), goes through the frontier and is judged when its turn comes.
func (a outcomes) disallowedLinks(links []urlrule.Link, now time.Time) map[string]bool {
	var out map[string]bool
	for _, l := range links {
		name, err := urlrule.HostKey(l.URL)
		if err != nil {
			continue
		}
		h := a.hosts[name]
		if h == nil || h.robotsState != robotsReady || h.robots == nil || h.robots.Unreachable || !now.Before(h.robotsAt) {
			continue
		}
		if !h.robots.Allowed(urlrule.RobotsPath(l.URL)) {
			if out == nil {
				out = map[string]bool{}
			}
			out[l.URL] = true
		}
	}
	return out
}

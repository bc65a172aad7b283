package frontier

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// Reasons of failures that the scheduler itself decides. The words a
// fetcher reports (dns, refused, timeout, tls, reset, 4xx, 5xx, ...) are
// package page's, which the first three here are too; the last two are
// package session's, whose clients read them in failure records.
const (
	ReasonRobots     = page.ReasonRobots        // robots.txt disallows the URL
	ReasonSink       = page.ReasonSink          // every sink refused the page, MaxAttempts times
	ReasonOther      = page.ReasonOther         // anything without a reason of its own
	ReasonLost       = session.ReasonLost       // its lease was lost MaxLost times (a poison URL)
	ReasonUnreadable = session.ReasonUnreadable // a frontier message that does not decode, or an unusable URL
)

// hostBackoff is the wait before a failing host's try n+1 (n >= 1): base,
// doubling, capped at 10 minutes, with ±50% jitter so that the hosts that
// failed in one moment do not come back together.
func hostBackoff(base time.Duration, n int) time.Duration {
	d := base
	for i := 1; i < n && d < 10*time.Minute; i++ {
		d *= 2
	}
	d = min(d, 10*time.Minute)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d)
}

// downState is the failure count of one origin of a host (or of the whole
// host, under "").
type downState struct {
	count int
	why   string // the last failure's reason (page.Reason*)
	err   string // and its error
	down  bool
}

// downFor returns the state that fails the URLs of origin now: the whole
// host's or the origin's; nil when they may be fetched.
func (h *host) downFor(origin string) *downState {
	if d := h.downs[""]; d != nil && d.down {
		return d
	}
	if d := h.downs[origin]; d != nil && d.down {
		return d
	}
	return nil
}

// answered resets origin's count: it answered. The entry goes, so that a
// host that failed once and recovered holds no failure state (and may be
// forgotten while idle: hostidle.go).
func (h *host) answered(origin string) {
	if d := h.downs[origin]; d != nil && !d.down {
		delete(h.downs, origin)
		if len(h.downs) == 0 {
			h.downs = nil
		}
	}
}

// hostDown counts a connection-level failure of origin ("": the host's
// robots.txt) against h. It reports whether the origin, or the whole host,
// has now failed for the campaign (its URLs held were failed). Until then
// the host waits RetryBackoff, doubling, before its next request.
func (a settler) hostDown(h *host, origin, reason, lastErr string, now time.Time) bool {
	if h.downs == nil {
		h.downs = map[string]*downState{}
	}
	d := h.downs[origin]
	if d == nil {
		d = &downState{}
		h.downs[origin] = d
	}
	d.count++
	d.why, d.err = orOther(reason), lastErr
	if d.count > a.cfg.HostRetryCount() {
		a.failOrigin(h, origin, d, now)
		return true
	}
	h.next = maxTime(h.next, now.Add(hostBackoff(a.cfg.HostRetryBackoff(), d.count)))
	return false
}

func (d *downState) message(h *host, origin string) string {
	what := h.name
	if origin != "" {
		what = origin
	}
	return fmt.Sprintf("%s unreachable after %d tries: %s", what, d.count, d.err)
}

// failOrigin declares origin (or, with "", the whole host) unreachable for
// the campaign: every URL of it held, and every one that comes later, is
// failed with the reason without a fetch (dead-lettered and recorded),
// never parked again.
func (a settler) failOrigin(h *host, origin string, d *downState, now time.Time) {
	d.down = true
	if origin == "" {
		h.down = true
	}
	a.hostsDown.Add(1)
	why := d.message(h, origin)
	a.log.Warn("host unreachable; its URLs fail without a fetch", "host", h.name, "origin", origin, "reason", d.why, "tries", d.count, "err", d.err)
	var kept entryHeap
	for _, e := range h.queue {
		if origin != "" && urlrule.Origin(e.msg.URL) != origin {
			kept = append(kept, e)
			continue
		}
		delete(a.held, e.key)
		a.deadLetter(e, d.why, why)
	}
	heap.Init(&kept)
	h.queue = kept
	a.leaser().place(h, now)
}

// requeue puts a held entry back into its host's queue, unless its origin
// (or the whole host) has failed for the campaign since it was leased:
// then it is dead-lettered with that reason, as every URL of a failed host
// is. A host down for good has no work (hasWork), so an entry pushed back
// into it would never be leased, nor settled, and its campaign would
// never drain.
func (a settler) requeue(h *host, e *entry) {
	origin := urlrule.Origin(e.msg.URL)
	if d := h.downFor(origin); d != nil {
		delete(a.held, e.key)
		a.deadLetter(e, d.why, d.message(h, origin))
		return
	}
	heap.Push(&h.queue, e)
}

// failReasons counts a campaign's failures by reason, for the stats. The
// actor embeds it; any goroutine counts.
type failReasons struct {
	reasonsMu sync.Mutex
	reasons   map[string]int64
}

// countReason counts a failure by its reason for the stats.
func (r *failReasons) countReason(reason string) {
	r.reasonsMu.Lock()
	if r.reasons == nil {
		r.reasons = map[string]int64{}
	}
	r.reasons[reason]++
	r.reasonsMu.Unlock()
}

func (r *failReasons) reasonCounts() map[string]int64 {
	r.reasonsMu.Lock()
	defer r.reasonsMu.Unlock()
	if len(r.reasons) == 0 {
		return nil
	}
	out := make(map[string]int64, len(r.reasons))
	for k, v := range r.reasons {
		out[k] = v
	}
	return out
}

// recordFailures writes failure records to the seen store, which keeps
// them readable after the campaign ended (seen.Store.RecordFailures).
func (a *campaignActor) recordFailures(fs []failure.Record) error {
	if len(fs) == 0 {
		return nil
	}
	if err := a.srv.store.RecordFailures(a.key, fs); err != nil {
		return fmt.Errorf("failure store: %w", err)
	}
	return nil
}

package frontier

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"sync"
	"time"
)

// FailureRecord is one URL that did not become a page (or became a page
// with an error status), for `starter failures`: the crawl.log view an
// operator of a large crawl reads.
type FailureRecord struct {
	URL       string    `json:"url"`
	Reason    string    `json:"reason"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	First     time.Time `json:"first"`
	Last      time.Time `json:"last"`
}

// FailureStore keeps a campaign's failure records readable after the
// campaign ended, until they are dropped: a new run of the campaign ID
// drops them, as does `starter failures ID --clear`.
type FailureStore interface {
	// RecordFailures adds records; a URL recorded again keeps its First
	// and takes the rest from the new record (its attempts add up).
	RecordFailures(campaign string, fs []FailureRecord) error
	// Failures lists a campaign's records with the given reason ("" for
	// all), by URL.
	Failures(campaign, reason string) ([]FailureRecord, error)
	// DropFailures forgets a campaign's records.
	DropFailures(campaign string) error
}

// Reasons of failures that the scheduler itself decides (the fetcher's are
// in package fetch: dns, refused, timeout, tls, reset, 4xx, 5xx, ...).
const (
	ReasonRobots     = "robots"     // robots.txt disallows the URL
	ReasonSink       = "sink"       // every sink refused the page, MaxAttempts times
	ReasonLost       = "lost"       // its lease was lost MaxLost times (a poison URL)
	ReasonUnreadable = "unreadable" // a frontier message that does not decode, or an unusable URL
	ReasonOther      = "other"      // anything without a reason of its own
)

// memFailures is an in-memory FailureStore (MemorySeen embeds it).
type memFailures struct {
	mu sync.Mutex
	m  map[string]map[string]FailureRecord
}

// RecordFailures implements FailureStore.
func (s *memFailures) RecordFailures(c string, fs []FailureRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]map[string]FailureRecord{}
	}
	if s.m[c] == nil {
		s.m[c] = map[string]FailureRecord{}
	}
	for _, f := range fs {
		s.m[c][f.URL] = mergeFailure(s.m[c][f.URL], f)
	}
	return nil
}

// Failures implements FailureStore.
func (s *memFailures) Failures(c, reason string) ([]FailureRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []FailureRecord
	for _, f := range s.m[c] {
		if reason == "" || f.Reason == reason {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, nil
}

// DropFailures implements FailureStore.
func (s *memFailures) DropFailures(c string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
	return nil
}

// mergeFailure folds a new record of a URL into the old one (zero: none).
func mergeFailure(old, f FailureRecord) FailureRecord {
	if old.URL == "" {
		return f
	}
	f.Attempts += old.Attempts
	if !old.First.IsZero() && old.First.Before(f.First) {
		f.First = old.First
	}
	return f
}

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
	why   string // the last failure's reason (fetch.Reason*)
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

// answered resets origin's count: it answered.
func (h *host) answered(origin string) {
	if d := h.downs[origin]; d != nil && !d.down {
		d.count = 0
	}
}

// originOf returns scheme://host[:port] of a URL ("" when it does not
// parse: such a URL never gets this far).
func originOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// hostDown counts a connection-level failure of origin ("": the host's
// robots.txt) against h. It reports whether the origin, or the whole host,
// has now failed for the campaign (its URLs held were failed). Until then
// the host waits RetryBackoff, doubling, before its next request.
func (a *campaignActor) hostDown(h *host, origin, reason, lastErr string, now time.Time) bool {
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
func (a *campaignActor) failOrigin(h *host, origin string, d *downState, now time.Time) {
	d.down = true
	if origin == "" {
		h.down = true
	}
	a.hostsDown.Add(1)
	why := d.message(h, origin)
	a.log.Warn("host unreachable; its URLs fail without a fetch", "host", h.name, "origin", origin, "reason", d.why, "tries", d.count, "err", d.err)
	var kept entryHeap
	for _, e := range h.queue {
		if origin != "" && originOf(e.msg.URL) != origin {
			kept = append(kept, e)
			continue
		}
		delete(a.held, e.key)
		a.deadLetter(e, d.why, why)
	}
	heap.Init(&kept)
	h.queue = kept
	a.place(h, now)
}

// countReason counts a failure by its reason for the stats.
func (a *campaignActor) countReason(reason string) {
	a.reasonsMu.Lock()
	a.reasons[reason]++
	a.reasonsMu.Unlock()
}

func (a *campaignActor) reasonCounts() map[string]int64 {
	a.reasonsMu.Lock()
	defer a.reasonsMu.Unlock()
	if len(a.reasons) == 0 {
		return nil
	}
	out := make(map[string]int64, len(a.reasons))
	for k, v := range a.reasons {
		out[k] = v
	}
	return out
}

// recordFailures writes failure records to the store, when it keeps them.
func (a *campaignActor) recordFailures(fs []FailureRecord) error {
	st, ok := a.srv.store.(FailureStore)
	if !ok || len(fs) == 0 {
		return nil
	}
	if err := st.RecordFailures(a.cfg.ID, fs); err != nil {
		return fmt.Errorf("failure store: %w", err)
	}
	return nil
}

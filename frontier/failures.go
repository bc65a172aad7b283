package frontier

import (
	"fmt"
	"math/rand/v2"
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

// hostDown counts a connection-level failure against h. It reports
// whether h has now failed for the campaign (its URLs were failed).
func (a *campaignActor) hostDown(h *host, reason, lastErr string, now time.Time) bool {
	if reason == "" {
		reason = ReasonOther
	}
	h.downCount++
	h.downWhy, h.downErr = reason, lastErr
	if h.downCount > a.cfg.HostRetryCount() {
		a.failHost(h, now)
		return true
	}
	h.next = maxTime(h.next, now.Add(hostBackoff(a.cfg.HostRetryBackoff(), h.downCount)))
	return false
}

// failHost declares h unreachable for the campaign: every URL it holds,
// and every one that comes later, is failed with h's reason without a
// fetch (dead-lettered and recorded), never parked again.
func (a *campaignActor) failHost(h *host, now time.Time) {
	h.down = true
	a.hostsDown.Add(1)
	why := fmt.Sprintf("host %s unreachable after %d tries: %s", h.name, h.downCount, h.downErr)
	a.log.Warn("host unreachable; its URLs fail without a fetch", "host", h.name, "reason", h.downWhy, "tries", h.downCount, "err", h.downErr)
	for _, e := range h.queue {
		delete(a.held, e.key)
		a.deadLetter(e, h.downWhy, why)
	}
	h.queue = nil
	a.place(h, now)
}

// failHostURL fails one URL of a host that is down.
func (a *campaignActor) failHostURL(h *host, e *entry) {
	a.deadLetter(e, h.downWhy, fmt.Sprintf("host %s unreachable after %d tries: %s", h.name, h.downCount, h.downErr))
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

package frontier

import (
	"slices"
	"strings"
	"sync"

	"github.com/drover-crawl/drover/frontier/session"
)

// SeenStore is a scheduler's durable record of the URLs a campaign has
// queued and done, keyed by the 128-bit hash of the normalized URL, and of
// the URLs that did not become a page (failure records).
//
// The two marks mean different things and must not be mixed up:
//   - queued: a publish of the URL was confirmed by RabbitMQ. It lets the
//     scheduler skip re-publishing a link. The caller writes it only after
//     the confirm: a mark written before would lose the URL for good if the
//     process died in between.
//   - done: the URL's outcome is durably recorded (sink acknowledged, links
//     published and confirmed). The caller writes it only then, and acks
//     the delivery after MarkDone returned; a delivery of a done URL is
//     acked without fetching it (a duplicate message).
//
// Once MarkQueued or MarkDone returned nil, the marks survive a crash of the
// process. Losing marks (an OS crash, a damaged store) costs duplicate
// messages or, at worst, a duplicate fetch, never a lost URL: a store that
// cannot tell answers "not seen".
//
// Failure records live apart from the marks: Drop leaves them, so that a
// campaign's failures stay readable after it ended, until DropFailures.
type SeenStore interface {
	// Queued reports, for each key, whether it is marked queued or done.
	Queued(campaign string, keys []Key) ([]bool, error)
	// MarkQueued marks keys queued (a key already done stays done).
	MarkQueued(campaign string, keys []Key) error
	// Done reports whether key is marked done.
	Done(campaign string, key Key) (bool, error)
	// MarkDone marks keys done.
	MarkDone(campaign string, keys []Key) error
	// Drop forgets a campaign's marks (not its failure records).
	Drop(campaign string) error

	// RecordFailures stores failure records, one per URL. Recording a URL
	// again takes the new Reason, Attempts, LastError and Last and keeps
	// the earliest First.
	RecordFailures(campaign string, fs []session.FailureRecord) error
	// Failures returns a campaign's failure records with the given reason
	// ("" for all), sorted by URL.
	Failures(campaign string, reason string) ([]session.FailureRecord, error)
	// DropFailures forgets a campaign's failure records.
	DropFailures(campaign string) error

	Close() error
}

func sortFailures(fs []session.FailureRecord) {
	slices.SortFunc(fs, func(a, b session.FailureRecord) int { return strings.Compare(a.URL, b.URL) })
}

const (
	markQueued byte = 1
	markDone   byte = 2
)

// MemorySeen is an in-memory SeenStore for tests and throwaway runs; it
// does not survive a restart.
type MemorySeen struct {
	mu sync.Mutex
	m  map[string]map[Key]byte
	f  map[string]map[string]session.FailureRecord
}

// NewMemorySeen returns an empty MemorySeen.
func NewMemorySeen() *MemorySeen {
	return &MemorySeen{m: map[string]map[Key]byte{}, f: map[string]map[string]session.FailureRecord{}}
}

func (s *MemorySeen) set(c string) map[Key]byte {
	if s.m[c] == nil {
		s.m[c] = map[Key]byte{}
	}
	return s.m[c]
}

// Queued implements SeenStore.
func (s *MemorySeen) Queued(c string, keys []Key) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.set(c)
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = set[k] != 0
	}
	return out, nil
}

// MarkQueued implements SeenStore.
func (s *MemorySeen) MarkQueued(c string, keys []Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.set(c)
	for _, k := range keys {
		if set[k] == 0 {
			set[k] = markQueued
		}
	}
	return nil
}

// Done implements SeenStore.
func (s *MemorySeen) Done(c string, k Key) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set(c)[k] == markDone, nil
}

// MarkDone implements SeenStore.
func (s *MemorySeen) MarkDone(c string, keys []Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.set(c)
	for _, k := range keys {
		set[k] = markDone
	}
	return nil
}

// Drop implements SeenStore.
func (s *MemorySeen) Drop(c string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
	return nil
}

// RecordFailures implements SeenStore.
func (s *MemorySeen) RecordFailures(c string, fs []session.FailureRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f[c] == nil {
		s.f[c] = map[string]session.FailureRecord{}
	}
	for _, f := range fs {
		s.f[c][f.URL] = s.f[c][f.URL].Merge(f)
	}
	return nil
}

// Failures implements SeenStore.
func (s *MemorySeen) Failures(c, reason string) ([]session.FailureRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []session.FailureRecord
	for _, f := range s.f[c] {
		if reason == "" || f.Reason == reason {
			out = append(out, f)
		}
	}
	sortFailures(out)
	return out, nil
}

// DropFailures implements SeenStore.
func (s *MemorySeen) DropFailures(c string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.f, c)
	return nil
}

// Close implements SeenStore.
func (s *MemorySeen) Close() error { return nil }

package frontier

import "sync"

// SeenStore is a scheduler's durable record of the URLs a campaign has
// queued and done, keyed by the 128-bit hash of the normalized URL.
//
// The two marks mean different things and must not be mixed up:
//   - queued: a publish of the URL was confirmed by RabbitMQ. It lets the
//     scheduler skip re-publishing a link. It is written only after the
//     confirm: a mark written before would lose the URL for good if the
//     process died in between.
//   - done: the URL's outcome is durably recorded. A delivery of a done URL
//     is acked without fetching it (a duplicate message).
//
// Losing marks (a crash before they reach disk) costs duplicate messages or,
// at worst, a duplicate fetch, never a lost URL.
type SeenStore interface {
	// Queued reports, for each key, whether it is marked queued or done.
	Queued(campaign string, keys []Key) ([]bool, error)
	// MarkQueued marks keys queued (a key already done stays done).
	MarkQueued(campaign string, keys []Key) error
	// Done reports whether key is marked done.
	Done(campaign string, key Key) (bool, error)
	// MarkDone marks keys done.
	MarkDone(campaign string, keys []Key) error
	// Drop forgets a campaign.
	Drop(campaign string) error
	Close() error
}

const (
	markQueued byte = 1
	markDone   byte = 2
)

// MemorySeen is an in-memory SeenStore for tests and throwaway runs; it
// does not survive a restart.
type MemorySeen struct {
	memFailures
	mu sync.Mutex
	m  map[string]map[Key]byte
}

// NewMemorySeen returns an empty MemorySeen.
func NewMemorySeen() *MemorySeen { return &MemorySeen{m: map[string]map[Key]byte{}} }

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

// Close implements SeenStore.
func (s *MemorySeen) Close() error { return nil }

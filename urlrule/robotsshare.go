package urlrule

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"weak"
)

// RobotsShare parses robots.txt files as ParseRobots does and hands out one
// *Robots for every file of the same status and bytes while any holder
// keeps it: a crawl of many hosts finds the same few files again and again
// (a CMS's default, a hosting provider's, an empty one), and a scheduler
// keeps one parse of each instead of one per host. Since Robots is
// immutable, the holders may share it.
//
// Entries are weak: a parse no host holds any more is collected, and its
// entry goes with it. Files are told apart by their SHA-256, so a host
// cannot forge another's rules by a hash collision. The zero value is
// ready to use; it is safe for concurrent use.
type RobotsShare struct {
	mu sync.Mutex
	m  map[shareKey]weak.Pointer[Robots]
}

type shareKey struct {
	status int
	sum    [sha256.Size]byte
}

// Parse is ParseRobots, sharing its result with every earlier parse of the
// same status and body that is still held. An error, 3xx, 4xx or 5xx
// answer gets a fresh Robots of its own: they are small, and the bytes do
// not matter for them.
func (s *RobotsShare) Parse(status int, body []byte, fetchErr error) *Robots {
	if fetchErr != nil || status < 200 || status >= 300 {
		return ParseRobots(status, body, fetchErr)
	}
	if len(body) > RobotsBodyCap {
		body = body[:RobotsBodyCap]
	}
	k := shareKey{status: status, sum: sha256.Sum256(body)}
	s.mu.Lock()
	if r := s.m[k].Value(); r != nil {
		s.mu.Unlock()
		return r
	}
	s.mu.Unlock()
	r := ParseRobots(status, body, nil)
	s.mu.Lock()
	defer s.mu.Unlock()
	if old := s.m[k].Value(); old != nil {
		return old // parsed meanwhile by another caller
	}
	if s.m == nil {
		s.m = make(map[shareKey]weak.Pointer[Robots])
	}
	s.m[k] = weak.Make(r)
	runtime.AddCleanup(r, s.forget, k)
	return r
}

// forget deletes k's entry once its parse is collected; an entry made
// again for the same bytes since then holds a live parse and stays.
func (s *RobotsShare) forget(k shareKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if wp, ok := s.m[k]; ok && wp.Value() == nil {
		delete(s.m, k)
	}
}

// Len is the number of distinct files held: those whose parse is still
// referenced, and, for a moment, some whose parse was just collected.
func (s *RobotsShare) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

package devstack

import (
	"strings"
	"sync"
)

// SyncBuffer collects text written from several goroutines (a supervisor's
// messages, a process's output) for a reader that looks at it meanwhile.
// The zero value is empty and ready.
type SyncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns all that was written so far.
func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

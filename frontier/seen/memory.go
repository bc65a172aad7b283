package seen

import (
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/drover-crawl/drover/failure"
)

// Memory is an in-memory Store for tests and throwaway runs; it
// does not survive a restart.
type Memory struct {
	mu sync.Mutex
	m  map[string]map[Key]byte
	f  map[string]map[string]failure.Record
	r  map[string][]byte
	h  map[string]map[Key][]byte
	v  map[string]map[string]Due                 // revisit schedule, by scheduleKey
	u  map[string]map[string]map[string]struct{} // URL index: campaign -> host -> URLs
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory {
	return &Memory{m: map[string]map[Key]byte{}, f: map[string]map[string]failure.Record{}}
}

func (s *Memory) set(c string) map[Key]byte {
	if s.m[c] == nil {
		s.m[c] = map[Key]byte{}
	}
	return s.m[c]
}

// Queued implements Store.
func (s *Memory) Queued(c string, keys []Key) ([]bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.set(c)
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = set[k] != 0
	}
	return out, nil
}

// MarkQueued implements Store.
func (s *Memory) MarkQueued(c string, keys []Key) error {
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

// Done implements Store.
func (s *Memory) Done(c string, k Key) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set(c)[k] == markDone, nil
}

// MarkDone implements Store.
func (s *Memory) MarkDone(c string, keys []Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.set(c)
	for _, k := range keys {
		set[k] = markDone
	}
	return nil
}

// Drop implements Store.
func (s *Memory) Drop(c string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, c)
	delete(s.v, c)
	delete(s.u, c)
	return nil
}

// IndexURLs implements Store.
func (s *Memory) IndexURLs(c string, urls []HostURL) error {
	if err := checkIndexed(urls); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.u == nil {
		s.u = map[string]map[string]map[string]struct{}{}
	}
	if s.u[c] == nil {
		s.u[c] = map[string]map[string]struct{}{}
	}
	for _, u := range urls {
		if s.u[c][u.Host] == nil {
			s.u[c][u.Host] = map[string]struct{}{}
		}
		s.u[c][u.Host][u.URL] = struct{}{}
	}
	return nil
}

// HostURLs implements Store.
func (s *Memory) HostURLs(c, host, after string, limit int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	us := slices.Sorted(maps.Keys(s.u[c][host]))
	i, found := slices.BinarySearch(us, after)
	if found {
		i++
	}
	return slices.Clone(us[i:min(len(us), i+max(limit, 0))]), nil
}

// RecordFailures implements Store.
func (s *Memory) RecordFailures(c string, fs []failure.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f[c] == nil {
		s.f[c] = map[string]failure.Record{}
	}
	for _, f := range fs {
		s.f[c][f.URL] = s.f[c][f.URL].Merge(f)
	}
	return nil
}

// Failures implements Store.
func (s *Memory) Failures(c, reason string) ([]failure.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []failure.Record
	for _, f := range s.f[c] {
		if reason == "" || f.Reason == reason {
			out = append(out, f)
		}
	}
	sortFailures(out)
	return out, nil
}

// DropFailures implements Store.
func (s *Memory) DropFailures(c string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.f, c)
	return nil
}

// Campaigns implements Store.
func (s *Memory) Campaigns(id, sep string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for c := range s.m {
		if isRunOf(c, id, sep) && len(s.m[c]) > 0 {
			out = append(out, c)
		}
	}
	for c := range s.f {
		if isRunOf(c, id, sep) && len(s.f[c]) > 0 && !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out, nil
}

// isRunOf reports whether campaign c is id, or a run of it (id+sep+run).
func isRunOf(c, id, sep string) bool {
	return c == id || strings.HasPrefix(c, id+sep)
}

// SetRules implements Store.
func (s *Memory) SetRules(c string, rules []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.r == nil {
		s.r = map[string][]byte{}
	}
	s.r[c] = slices.Clone(rules)
	return nil
}

// Rules implements Store.
func (s *Memory) Rules(c string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.r[c]), nil
}

// History implements Store.
func (s *Memory) History(lineage string, k Key) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.h[lineage][k]), nil
}

// SetHistory implements Store.
func (s *Memory) SetHistory(lineage string, keys []Key, values [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.h == nil {
		s.h = map[string]map[Key][]byte{}
	}
	if s.h[lineage] == nil {
		s.h[lineage] = map[Key][]byte{}
	}
	for i, k := range keys {
		s.h[lineage][k] = slices.Clone(values[i])
	}
	return nil
}

// DropHistory implements Store.
func (s *Memory) DropHistory(lineage string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.h, lineage)
	return nil
}

// Close implements Store.
func (s *Memory) Close() error { return nil }

package frontier

import (
	"errors"
	"time"

	"github.com/drover-crawl/drover/session"
)

// endedFor is how long a scheduler refuses a fetcher session key after
// OpEnd ended it. A session reconnecting later than that is one whose
// cancellation long reached it on a heartbeat response (the backstop).
const endedFor = 10 * time.Minute

// errSessionEnded refuses a session whose key was ended (Refused.Ended).
var errSessionEnded = errors.New("this fetcher session was ended by its campaign (pause, stop, scale-down or restart)")

// endSessions is OpEnd: it remembers keys as ended (a session dialing with
// one is refused from now on, campaign actor or not) and ends the
// campaign's open sessions among them. It returns how many were open.
func (s *Server) endSessions(id string, keys []string) int {
	now := time.Now()
	s.mu.Lock()
	for k, at := range s.ended {
		if now.Sub(at) > endedFor {
			delete(s.ended, k)
		}
	}
	for _, k := range keys {
		if k != "" {
			s.ended[k] = now
		}
	}
	a := s.campaigns[id]
	s.mu.Unlock()
	n := 0
	if a != nil {
		a.call(func() { n = a.endSessions(keys) })
	}
	s.log.Info("fetcher sessions ended by the campaign", "campaign", id, "keys", len(keys), "open", n)
	return n
}

// isEnded reports whether a session key was ended.
func (s *Server) isEnded(key string) bool {
	if key == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.ended[key]
	return ok && time.Since(at) <= endedFor
}

// endSessions sends FrameEnd to the open sessions named by keys, once
// each: they get no more leases (their credit is dropped, and ignored
// from now on); what they hold comes back as outcomes, or as returned
// leases when the session closes. Leases queued for them before it were
// sent first (one writer, in order).
func (a *campaignActor) endSessions(keys []string) int {
	want := make(map[string]bool, len(keys))
	for _, k := range keys {
		if k != "" {
			want[k] = true
		}
	}
	n := 0
	for sess := range a.sessions {
		if !want[sess.key] {
			continue
		}
		n++
		if !sess.ending {
			sess.ending, sess.credit = true, 0
			sess.send(session.FrameEnd, nil)
		}
	}
	return n
}

package testweb

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// holdGate holds page bodies half-sent, so that a test can catch fetches in
// the middle of a body (a pause or a kill that must not lose them). Web
// embeds it, so its methods are Web's.
type holdGate struct {
	mu   sync.Mutex
	ch   chan struct{} // non-nil while holding; closed to release
	held atomic.Int64
}

// HoldBodies makes every HTML page served from now on send its head and
// the first half of its body, then wait until ReleaseBodies or until the
// client goes away. Held says how many responses wait.
func (g *holdGate) HoldBodies() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch == nil {
		g.ch = make(chan struct{})
	}
}

// ReleaseBodies lets the held responses finish and stops holding.
func (g *holdGate) ReleaseBodies() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ch != nil {
		close(g.ch)
		g.ch = nil
	}
}

// Held is the number of responses waiting in the middle of their body now.
func (g *holdGate) Held() int { return int(g.held.Load()) }

// writeBody writes body, holding it half-sent while HoldBodies is on.
func (g *holdGate) writeBody(rw http.ResponseWriter, r *http.Request, res response) {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch == nil || res.ctype != contentHTML || res.status != http.StatusOK || len(res.body) < 2 {
		_, _ = rw.Write(res.body) // the client went away: nothing to do
		return
	}
	half := len(res.body) / 2
	if _, err := rw.Write(res.body[:half]); err != nil {
		return
	}
	if f, ok := rw.(http.Flusher); ok {
		f.Flush()
	}
	g.held.Add(1)
	defer g.held.Add(-1)
	select {
	case <-ch:
		_, _ = rw.Write(res.body[half:])
	case <-r.Context().Done():
	}
}

package testweb

import (
	"net/url"
	"slices"
	"time"
)

// Request is one request as the server saw it at its start, with the
// status it answered, which is decided by then.
type Request struct {
	URL   string // "http://" + Host + request URI
	Host  string // the Host header
	UA    string // the User-Agent header
	Start time.Time
	// IfNoneMatch is the If-None-Match header, its lines joined by ", ";
	// "" when absent.
	IfNoneMatch string
	// IfModifiedSince is the If-Modified-Since header; "" when absent.
	IfModifiedSince string
	Status          int // the status the server answered
}

// Conditional reports whether the request carried a validator: an
// If-None-Match or an If-Modified-Since header.
func (r Request) Conditional() bool { return r.IfNoneMatch != "" || r.IfModifiedSince != "" }

func (w *Web) record(r Request) {
	w.mu.Lock()
	w.reqs = append(w.reqs, r)
	w.counts[r.URL]++
	w.mu.Unlock()
}

// Count returns how many times rawURL was requested, compared as the
// string "http://" + Host header + request URI.
func (w *Web) Count(rawURL string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.counts[rawURL]
}

// Requests returns every request since Start or Reset, in arrival order.
func (w *Web) Requests() []Request {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.reqs)
}

// Missing returns the URLs of Pages never requested, in Pages order.
func (w *Web) Missing() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, p := range w.pages {
		if w.counts[p] == 0 {
			out = append(out, p)
		}
	}
	return out
}

// Duplicates returns the URLs requested more than once, robots.txt
// excluded, with their counts.
func (w *Web) Duplicates() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int)
	for u, n := range w.counts {
		if n > 1 && !isRobots(u) {
			out[u] = n
		}
	}
	return out
}

// Answered returns the URL of every request answered with status, robots.txt
// excluded, in arrival order (a URL fetched twice appears twice).
func (w *Web) Answered(status int) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.reqs {
		if r.Status == status && !isRobots(r.URL) {
			out = append(out, r.URL)
		}
	}
	return out
}

// Conditional maps every URL requested, robots.txt excluded, to whether
// one of its requests at least carried a validator (Request.Conditional).
func (w *Web) Conditional() map[string]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]bool)
	for _, r := range w.reqs {
		if !isRobots(r.URL) {
			out[r.URL] = out[r.URL] || r.Conditional()
		}
	}
	return out
}

// DisallowedHits returns the URL of every request under /private/, in
// arrival order (a URL fetched twice appears twice).
func (w *Web) DisallowedHits() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, r := range w.reqs {
		if w.Disallowed(r.URL) {
			out = append(out, r.URL)
		}
	}
	return out
}

// Total returns the number of requests counted, robots.txt included.
func (w *Web) Total() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.reqs)
}

// Reset forgets every request counted so far.
func (w *Web) Reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = nil
	clear(w.counts)
}

func isRobots(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Path == "/robots.txt"
}

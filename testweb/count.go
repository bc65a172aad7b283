package testweb

import (
	"net/url"
	"slices"
	"sync"
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

// requestLog is what the server saw: every request since Start or Reset,
// in arrival order, and how many times each URL was requested. Web
// embeds it, so its methods are Web's.
type requestLog struct {
	mu     sync.Mutex
	counts map[string]int
	reqs   []Request
}

func (l *requestLog) record(r Request) {
	l.mu.Lock()
	if l.counts == nil {
		l.counts = map[string]int{}
	}
	l.reqs = append(l.reqs, r)
	l.counts[r.URL]++
	l.mu.Unlock()
}

// unrequested returns those of urls never requested, in order.
func (l *requestLog) unrequested(urls []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, u := range urls {
		if l.counts[u] == 0 {
			out = append(out, u)
		}
	}
	return out
}

// Count returns how many times rawURL was requested, compared as the
// string "http://" + Host header + request URI.
func (l *requestLog) Count(rawURL string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[rawURL]
}

// Requests returns every request since Start or Reset, in arrival order.
func (l *requestLog) Requests() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reqs)
}

// Missing returns the URLs of Pages never requested, in Pages order.
func (w *Web) Missing() []string { return w.unrequested(w.pages) }

// Duplicates returns the URLs requested more than once, robots.txt
// excluded, with their counts.
func (l *requestLog) Duplicates() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int)
	for u, n := range l.counts {
		if n > 1 && !isRobots(u) {
			out[u] = n
		}
	}
	return out
}

// Answered returns the URL of every request answered with status, robots.txt
// excluded, in arrival order (a URL fetched twice appears twice).
func (l *requestLog) Answered(status int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.reqs {
		if r.Status == status && !isRobots(r.URL) {
			out = append(out, r.URL)
		}
	}
	return out
}

// Conditional maps every URL requested, robots.txt excluded, to whether
// one of its requests at least carried a validator (Request.Conditional).
func (l *requestLog) Conditional() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]bool)
	for _, r := range l.reqs {
		if !isRobots(r.URL) {
			out[r.URL] = out[r.URL] || r.Conditional()
		}
	}
	return out
}

// DisallowedHits returns the URL of every request under /private/, in
// arrival order (a URL fetched twice appears twice).
func (w *Web) DisallowedHits() []string {
	var out []string
	for _, r := range w.Requests() {
		if w.Disallowed(r.URL) {
			out = append(out, r.URL)
		}
	}
	return out
}

// Total returns the number of requests counted, robots.txt included.
func (l *requestLog) Total() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.reqs)
}

// Reset forgets every request counted so far.
func (l *requestLog) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = nil
	clear(l.counts)
}

func isRobots(rawURL string) bool {
	u, err := url.Parse(rawURL)
	return err == nil && u.Path == "/robots.txt"
}

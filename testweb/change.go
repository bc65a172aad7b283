package testweb

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Validators (Config.Validators), and page versions and the web's clock
// (Change, ChangePages, Advance).

// clockBase is the web's clock at Start, and the Last-Modified of every
// page that has not changed.
var clockBase = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// pageState is what a page serves at one version. A change replaces it
// whole and never modifies it, so a request reads it with one atomic load.
type pageState struct {
	body     []byte
	etag     string    // quoted; "" without Validators and on odd pages
	lastMod  string    // an HTTP date; "" without Validators and on even pages
	modified time.Time // when the version was made, whole seconds
	version  int
}

// versions is what changes between runs: every generated page's current
// state and the web's clock. A change replaces a page's state whole, so a
// request reads it with one atomic load and never takes mu. Web embeds it,
// so its methods are Web's.
type versions struct {
	site *layout // the web's; read-only
	// render renders page n of host h at version v, made at modified.
	render func(h, n, v int, modified time.Time) *pageState

	// html is every generated page's current state, [host][page].
	html [][]atomic.Pointer[pageState]

	mu  sync.Mutex // serializes changes; guards now and rng
	now time.Time  // the web's clock
	rng *rand.Rand // picks the pages of Change
}

// init renders version 0 of every page of site, starts the clock at
// clockBase and seeds the picks with the web's shape, so that two webs of
// one config change the same pages.
func (s *versions) init(site *layout, render func(h, n, v int, modified time.Time) *pageState) {
	s.site, s.render = site, render
	s.html = make([][]atomic.Pointer[pageState], site.hosts)
	for h := range s.html {
		s.html[h] = make([]atomic.Pointer[pageState], site.perHost)
		for n := range s.html[h] {
			s.html[h][n].Store(render(h, n, 0, clockBase))
		}
	}
	s.now = clockBase
	s.rng = rand.New(rand.NewPCG(uint64(site.hosts)<<32|uint64(site.perHost), 0xc4a17e))
}

// current is page n of host h at its current version.
func (s *versions) current(h, n int) *pageState { return s.html[h][n].Load() }

// renderPage renders page n of host h at version v, made at modified.
func (w *Web) renderPage(h, n, v int, modified time.Time) *pageState {
	p := &pageState{body: w.page(h, n, w.navLinks(h), v), modified: modified, version: v}
	switch {
	case !w.cfg.Validators:
	case n%2 == 0:
		sum := sha256.Sum256(p.body)
		p.etag = `"` + hex.EncodeToString(sum[:8]) + `"`
	default:
		p.lastMod = modified.Format(http.TimeFormat)
	}
	return p
}

// Now returns the web's clock: 2026-01-01T00:00:00Z at Start, moved on by
// Advance and by every change. Wall time never moves it.
func (s *versions) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.now
}

// Advance moves the web's clock on by d; a negative d leaves it.
func (s *versions) Advance(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d > 0 {
		s.now = s.now.Add(d)
	}
}

// Change bumps the version of a share frac (in 0..1, rounded to a whole
// number of pages; out of range is clamped) of the generated pages, roots
// included, drawn from a source seeded by the config's shape: two webs of
// one config, given the same calls, change the same pages. It returns the
// URLs whose bytes changed in (host, page) order, each page's second URL
// after it. See ChangePages for what a change does.
func (s *versions) Change(frac float64) []string {
	total := s.site.hosts * s.site.perHost
	k := 0
	if frac > 0 {
		k = int(math.Round(min(frac, 1) * float64(total)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bump(sample(s.rng, total, k))
}

// Unchanged returns, sorted, the web's pages (Pages) not in changed (what
// Change and ChangePages returned): those a recrawl should find
// unchanged.
func (w *Web) Unchanged(changed []string) []string {
	isChanged := make(map[string]bool, len(changed))
	for _, u := range changed {
		isChanged[u] = true
	}
	var out []string
	for _, u := range w.Pages() {
		if !isChanged[u] {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return out
}

// ChangePages bumps the version of the pages of urls (page URLs or second
// URLs; a page named twice changes once). A changed page carries a
// "Revision N" paragraph, N its version, and the same links; its ETag
// changes, and its Last-Modified becomes the web's clock, which the call
// first moves on by a second to a whole second, so that every change is
// strictly later than the one before. It changes nothing and returns an
// error when a URL is not a generated page of the web.
func (s *versions) ChangePages(urls ...string) error {
	idx := make([]int, 0, len(urls))
	for _, u := range urls {
		h, n, ok := s.site.pageIndex(u)
		if !ok {
			return fmt.Errorf("testweb: ChangePages: %s is not a page of the web", u)
		}
		idx = append(idx, h*s.site.perHost+n)
	}
	slices.Sort(idx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bump(slices.Compact(idx))
	return nil
}

// bump makes a new version of the pages idx (h*PagesPerHost+n, sorted,
// distinct) and returns the URLs whose bytes changed. mu is held.
func (s *versions) bump(idx []int) []string {
	if len(idx) == 0 {
		return nil
	}
	now := s.now.Add(time.Second).Truncate(time.Second)
	s.now = now
	urls := make([]string, 0, len(idx))
	for _, i := range idx {
		h, n := i/s.site.perHost, i%s.site.perHost
		cur := s.html[h][n].Load()
		s.html[h][n].Store(s.render(h, n, cur.version+1, now))
		urls = append(urls, s.site.pageURL(h, n))
		if s.site.hasDup(h, n) {
			urls = append(urls, s.site.dupURL(h, n))
		}
	}
	return urls
}

// sample draws k distinct integers of 0..total-1 (Floyd's algorithm) and
// returns them sorted.
func sample(r *rand.Rand, total, k int) []int {
	chosen := make(map[int]bool, k)
	for j := total - k; j < total; j++ {
		t := r.IntN(j + 1)
		if chosen[t] {
			t = j
		}
		chosen[t] = true
	}
	return slices.Sorted(maps.Keys(chosen))
}

// Version returns the version of the page rawURL serves (a page's URL or
// its second URL): 0 until a change, one more at each. ok is false when
// rawURL is not a generated page of the web.
func (s *versions) Version(rawURL string) (v int, ok bool) {
	h, n, ok := s.site.pageIndex(rawURL)
	if !ok {
		return 0, false
	}
	return s.current(h, n).version, true
}

// Validator returns the validators a 200 for rawURL carries now: the
// quoted ETag of an even page, the Last-Modified HTTP date of an odd one,
// both "" without Config.Validators. ok is false when rawURL is not a
// generated page of the web.
func (s *versions) Validator(rawURL string) (etag, lastModified string, ok bool) {
	h, n, ok := s.site.pageIndex(rawURL)
	if !ok {
		return "", "", false
	}
	p := s.current(h, n)
	return p.etag, p.lastMod, true
}

// notModified answers a GET or HEAD of a page whose preconditions (RFC
// 9110, section 13.2.2) say that the client's copy is current with a 304
// that carries the page's validator and no body; it returns res otherwise.
// If-None-Match, when present and not empty, decides alone;
// If-Modified-Since counts only for a page with a Last-Modified.
func notModified(r *http.Request, res response) response {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return res
	}
	if inm := strings.Join(r.Header.Values("If-None-Match"), ","); strings.TrimSpace(inm) != "" {
		if !etagMatches(inm, res.page.etag) {
			return res
		}
	} else {
		ims := r.Header.Get("If-Modified-Since")
		if res.page.lastMod == "" || ims == "" {
			return res
		}
		t, err := http.ParseTime(ims)
		if err != nil || res.page.modified.After(t) {
			return res
		}
	}
	return response{status: http.StatusNotModified, page: res.page, known: true}
}

// etagMatches reports whether the If-None-Match list holds "*" or an
// entity tag that matches etag in the weak comparison (W/ ignored), as
// If-None-Match compares. An empty etag matches "*" only.
func etagMatches(list, etag string) bool {
	for s := list; ; {
		s = strings.TrimLeft(s, " \t,")
		if s == "" {
			return false
		}
		if s[0] == '*' {
			return true
		}
		s = strings.TrimPrefix(s, "W/")
		if s == "" || s[0] != '"' {
			return false // malformed: the rest is not a list
		}
		end := strings.IndexByte(s[1:], '"')
		if end < 0 {
			return false
		}
		if tag := s[:end+2]; etag != "" && tag == etag {
			return true
		}
		s = s[end+2:]
	}
}

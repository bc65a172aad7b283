package testweb

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// answer is a response with the headers the validator tests look at.
type answer struct {
	status               int
	etag, lastMod, ctype string
	body                 []byte
}

// send makes a request with headers given as name, value pairs.
func send(t *testing.T, c *http.Client, method, rawURL string, hdr ...string) answer {
	t.Helper()
	req, err := http.NewRequest(method, rawURL, nil)
	require.NoErrorf(t, err, "request %s", rawURL)
	req.Header.Set("User-Agent", testUA)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	require.NoErrorf(t, err, "%s %s", method, rawURL)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoErrorf(t, err, "%s %s: reading body", method, rawURL)
	h := resp.Header
	return answer{resp.StatusCode, h.Get("ETag"), h.Get("Last-Modified"), h.Get("Content-Type"), body}
}

// etagOf is the ETag the web derives from a body.
func etagOf(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:8]) + `"`
}

// TestValidators: even pages carry an ETag of their body, odd pages the
// base Last-Modified, other resources neither; without Validators no page
// carries one.
func TestValidators(t *testing.T) {
	w := startWeb(t, Config{Hosts: 2, PagesPerHost: 12, Validators: true, Base: 13})
	c := newClient()
	base := clockBase.Format(http.TimeFormat)
	for h := range 2 {
		for n := range 12 {
			u := w.pageURL(h, n)
			a := send(t, c, http.MethodGet, u)
			etag, lastMod, ok := w.Validator(u)
			assert.Falsef(t, !ok || a.status != http.StatusOK || a.etag != etag || a.lastMod != lastMod,
				"GET %s: %d ETag %q Last-Modified %q; Validator says %q %q (%v)", u, a.status, a.etag, a.lastMod, etag, lastMod, ok)
			even := n%2 == 0
			assert.Falsef(t, even && (a.etag != etagOf(a.body) || a.lastMod != "") || !even && (a.etag != "" || a.lastMod != base),
				"GET %s (page %d): ETag %q Last-Modified %q, want an ETag of the body on even pages, Last-Modified %q on odd ones", u, n, a.etag, a.lastMod, base)
		}
	}
	h0 := "http://" + w.Hosts()[0]
	for _, p := range []string{"/robots.txt", "/private/secret-0.html", pathDataBin, pathMissing, pathRedirect, "/nowhere"} {
		a := send(t, c, http.MethodGet, h0+p, "If-None-Match", "*")
		assert.Falsef(t, a.etag != "" || a.lastMod != "" || a.status == http.StatusNotModified,
			"GET %s: %d ETag %q Last-Modified %q, want no validator and no 304", p, a.status, a.etag, a.lastMod)
	}
	assert.Truef(t, w.Now().Equal(clockBase), "Now() at Start = %v, want %v", w.Now(), clockBase)

	off := startWeb(t, Config{Hosts: 1, PagesPerHost: 4, Base: 13})
	for _, u := range off.Pages()[:4] {
		a := send(t, c, http.MethodGet, u, "If-None-Match", "*", "If-Modified-Since", base)
		assert.Falsef(t, a.status != http.StatusOK || a.etag != "" || a.lastMod != "",
			"without Validators, GET %s: %d ETag %q Last-Modified %q, want 200 and no validator", u, a.status, a.etag, a.lastMod)
	}
}

// TestConditionalRequests checks the preconditions of RFC 9110: a matching
// If-None-Match or an If-Modified-Since at or after Last-Modified answer
// 304 with the validator and no body; anything else the full page.
func TestConditionalRequests(t *testing.T) {
	w := startWeb(t, Config{Hosts: 1, PagesPerHost: 10, Validators: true, Base: 14})
	c := newClient()
	even, odd := w.pageURL(0, 4), w.pageURL(0, 5)
	etag, _, _ := w.Validator(even)
	_, lastMod, _ := w.Validator(odd)
	at := func(d time.Duration) string { return clockBase.Add(d).Format(http.TimeFormat) }
	tests := []struct {
		name, method, url string
		hdr               []string
		want              int
	}{
		{"matching etag", "GET", even, []string{"If-None-Match", etag}, 304},
		{"matching etag, HEAD", "HEAD", even, []string{"If-None-Match", etag}, 304},
		{"etag in a list, weak", "GET", even, []string{"If-None-Match", `W/"x", W/` + etag}, 304},
		{"etag on a second line", "GET", even, []string{"If-None-Match", `"x"`, "If-None-Match", etag}, 304},
		{"star", "GET", even, []string{"If-None-Match", "*"}, 304},
		{"other etag", "GET", even, []string{"If-None-Match", `"x"`}, 200},
		{"etag without quotes", "GET", even, []string{"If-None-Match", strings.Trim(etag, `"`)}, 200},
		{"etag, POST", "POST", even, []string{"If-None-Match", etag}, 200},
		{"since on a page without Last-Modified", "GET", even, []string{"If-Modified-Since", at(time.Hour)}, 200},
		{"since Last-Modified", "GET", odd, []string{"If-Modified-Since", lastMod}, 304},
		{"since later", "GET", odd, []string{"If-Modified-Since", at(time.Hour)}, 304},
		{"since earlier", "GET", odd, []string{"If-Modified-Since", at(-time.Second)}, 200},
		{"since, not a date", "GET", odd, []string{"If-Modified-Since", "yesterday"}, 200},
		{"if-none-match decides", "GET", odd, []string{"If-None-Match", `"x"`, "If-Modified-Since", lastMod}, 200},
		{"star on a page without etag", "GET", odd, []string{"If-None-Match", "*"}, 304},
		{"no precondition", "GET", odd, nil, 200},
		{"empty if-none-match is absent", "GET", odd, []string{"If-None-Match", "", "If-Modified-Since", lastMod}, 304},
	}
	for _, tt := range tests {
		a := send(t, c, tt.method, tt.url, tt.hdr...)
		if !assert.Equalf(t, tt.want, a.status, "%s: %s %v: status", tt.name, tt.method, tt.hdr) {
			continue
		}
		wantETag, wantLM, _ := w.Validator(tt.url)
		assert.Falsef(t, a.etag != wantETag || a.lastMod != wantLM, "%s: ETag %q Last-Modified %q, want %q %q", tt.name, a.etag, a.lastMod, wantETag, wantLM)
		assert.Falsef(t, tt.want == http.StatusNotModified && (len(a.body) != 0 || a.ctype != ""),
			"%s: 304 with %d body bytes, Content-Type %q", tt.name, len(a.body), a.ctype)
		body, _ := w.Body(tt.url)
		assert.Falsef(t, tt.want == http.StatusOK && tt.method == "GET" && !bytes.Equal(a.body, body), "%s: 200 body differs from Body", tt.name)
	}
}

// TestChange: Change(0.1) changes a tenth of the pages; a changed page
// serves a new body with the same links and a new validator, and answers
// its old validator with 200; the others still answer 304.
func TestChange(t *testing.T) {
	w := startWeb(t, Config{Hosts: 2, PagesPerHost: 50, Validators: true, Base: 15})
	c := newClient()
	pages := w.Pages()[:100] // the generated pages, before host 0's extras
	type seen struct {
		body          []byte
		etag, lastMod string
	}
	before := map[string]seen{}
	for _, u := range pages {
		b, _ := w.Body(u)
		e, l, _ := w.Validator(u)
		before[u] = seen{b, e, l}
	}
	changed := w.Change(0.1)
	require.Falsef(t, len(changed) != 10 || len(slices.Compact(sorted(changed))) != 10,
		"Change(0.1) = %d URLs (%v), want 10 distinct pages", len(changed), changed)
	stamp := w.Now()
	assert.Truef(t, stamp.Equal(clockBase.Add(time.Second)), "Now() after a change = %v, want %v", stamp, clockBase.Add(time.Second))
	for _, u := range pages {
		old := before[u]
		cond := []string{"If-None-Match", old.etag}
		if old.etag == "" {
			cond = []string{"If-Modified-Since", old.lastMod}
		}
		a := send(t, c, http.MethodGet, u, cond...)
		v, _ := w.Version(u)
		if !slices.Contains(changed, u) {
			assert.Falsef(t, a.status != http.StatusNotModified || v != 0, "unchanged %s: %d at version %d, want 304 at 0", u, a.status, v)
			continue
		}
		body, _ := w.Body(u)
		switch {
		case a.status != http.StatusOK || v != 1:
			assert.Failf(t, "changed page: wrong status or version", "changed %s: %d at version %d, want 200 at 1", u, a.status, v)
		case !bytes.Equal(a.body, body) || bytes.Equal(body, old.body) || !bytes.Contains(body, []byte("Revision 1.")):
			assert.Failf(t, "changed page: wrong body", "changed %s: served body equal to Body %v, to the old body %v", u, bytes.Equal(a.body, body), bytes.Equal(body, old.body))
		case !slices.Equal(sorted(hrefs(body)), sorted(hrefs(old.body))):
			assert.Failf(t, "changed page: links differ", "changed %s: links differ", u)
		case old.etag != "" && (a.etag == old.etag || a.etag != etagOf(body)):
			assert.Failf(t, "changed page: wrong ETag", "changed %s: ETag %q, was %q", u, a.etag, old.etag)
		case old.lastMod != "" && a.lastMod != stamp.Format(http.TimeFormat):
			assert.Failf(t, "changed page: wrong Last-Modified", "changed %s: Last-Modified %q, want the clock %v", u, a.lastMod, stamp)
		}
	}
	assert.Equal(t, http.StatusNotModified, send(t, c, http.MethodGet, changed[0], "If-None-Match", "*").status, "changed page, If-None-Match *")
}

// TestChangePagesAndClock: ChangePages changes exactly its pages, each
// call strictly later than the one before; Advance moves the clock; an
// unknown URL changes nothing.
func TestChangePagesAndClock(t *testing.T) {
	w := startWeb(t, Config{Hosts: 1, PagesPerHost: 10, Validators: true, Base: 16})
	p3, p5 := w.pageURL(0, 3), w.pageURL(0, 5)
	require.NoError(t, w.ChangePages(p3, p3, p5))
	w.Advance(90*time.Minute + 500*time.Millisecond)
	w.Advance(-time.Hour)
	got, want := w.Now(), clockBase.Add(90*time.Minute+1500*time.Millisecond)
	assert.Truef(t, got.Equal(want), "Now() = %v, want %v", got, want)
	require.NoError(t, w.ChangePages(p3))
	v3, _ := w.Version(p3)
	v5, _ := w.Version(p5)
	_, lm3, _ := w.Validator(p3)
	_, lm5, _ := w.Validator(p5)
	assert.Falsef(t, v3 != 2 || v5 != 1, "versions %d and %d, want 2 and 1 (a page named twice in one call changes once)", v3, v5)
	want3 := clockBase.Add(90*time.Minute + 2*time.Second)
	assert.Falsef(t, lm3 != want3.Format(http.TimeFormat) || lm5 != clockBase.Add(time.Second).Format(http.TimeFormat) || !w.Now().Equal(want3),
		"Last-Modified %q and %q, clock %v; want %v, base+1s and %v", lm3, lm5, w.Now(), want3, want3)
	for _, bad := range []string{w.pageURL(0, 10), "http://" + w.Hosts()[0] + "/robots.txt", "http://" + w.Hosts()[0] + "/dup/1.html", "http://example.com/"} {
		assert.Errorf(t, w.ChangePages(p5, bad), "ChangePages(%s) = nil, want an error", bad)
	}
	v, _ := w.Version(p5)
	assert.Equalf(t, 1, v, "a failed ChangePages changed %s to version %d", p5, v)
	changed0 := w.Change(0)
	assert.Falsef(t, changed0 != nil || !w.Now().Equal(want3), "Change(0) = %v, clock %v; want nothing changed", changed0, w.Now())
	assert.Lenf(t, w.Change(2), 10, "Change(2) should change all 10 pages")
}

// TestChangeIsDeterministic: two webs of one Config and Port, given the
// same calls, change the same pages and serve the same bytes and
// validators.
func TestChangeIsDeterministic(t *testing.T) {
	cfg := Config{Hosts: 3, PagesPerHost: 40, Validators: true, Duplicates: 5, Base: 17}
	run := func(w *Web) (changed []string, bodies map[string]string) {
		changed = append(w.Change(0.1), w.Change(0.25)...)
		w.Advance(time.Minute)
		require.NoError(t, w.ChangePages(w.Pages()[7]))
		bodies = map[string]string{}
		for _, u := range w.Pages() {
			b, _ := w.Body(u)
			e, l, _ := w.Validator(u)
			bodies[u] = string(b) + "\x00" + e + "\x00" + l
		}
		return changed, bodies
	}
	first, err := Start(cfg)
	require.NoError(t, err)
	changed1, bodies1 := run(first)
	cfg.Port = first.Config().Port
	require.NoError(t, first.Close())
	second := startWeb(t, cfg)
	changed2, bodies2 := run(second)
	assert.Equal(t, changed1, changed2, "the webs changed different pages")
	assert.GreaterOrEqualf(t, len(changed1), 12+30, "Change(0.1), Change(0.25) of 120 pages returned %d URLs, want at least 42", len(changed1))
	assert.True(t, reflect.DeepEqual(bodies1, bodies2), "the webs serve different bytes or validators after the same calls")
	c := newClient()
	for _, u := range second.Pages()[:10] {
		got := send(t, c, http.MethodGet, u)
		assert.Truef(t, bodies2[u] == string(got.body)+"\x00"+got.etag+"\x00"+got.lastMod, "%s: served bytes or validators differ from Body and Validator", u)
	}
}

// TestDuplicates: the second URLs serve their pages' bytes and validators,
// the pages link to them, they are in Pages, and a crawl over the served
// links finds exactly Pages.
func TestDuplicates(t *testing.T) {
	w := startWeb(t, Config{Hosts: 2, PagesPerHost: 10, Duplicates: 12, Validators: true, Base: 18})
	c := newClient()
	second := w.SecondURLs()
	require.Falsef(t, len(second) != 12 || len(w.Pages()) != 20+3+12, "%d second URLs, %d pages; want 12 and 35", len(second), len(w.Pages()))
	h0, h1 := "http://"+w.Hosts()[0], "http://"+w.Hosts()[1]
	assert.Falsef(t, second[h0+"/dup/9.html"] != h0+"/p/9.html" || second[h1+"/dup/3.html"] != h1+"/p/3.html",
		"SecondURLs() = %v, want host 0's pages 1..9 and host 1's 1..3", second)
	for dup, orig := range second {
		assert.Containsf(t, w.Pages(), dup, "Pages() lacks %s", dup)
		a, b := send(t, c, http.MethodGet, dup), send(t, c, http.MethodGet, orig)
		assert.Falsef(t, a.status != http.StatusOK || !bytes.Equal(a.body, b.body) || a.etag != b.etag || a.lastMod != b.lastMod,
			"%s and %s differ: %d, same body %v, validators %q %q and %q %q",
			dup, orig, a.status, bytes.Equal(a.body, b.body), a.etag, a.lastMod, b.etag, b.lastMod)
		u, _ := url.Parse(dup)
		assert.Containsf(t, hrefs(b.body), u.Path, "%s does not link to %s", orig, u.Path)
	}
	for _, u := range []string{h1 + "/dup/4.html", h0 + "/dup/0.html", h0 + "/dup/10.html", h0 + "/dup/01.html"} {
		assert.Equalf(t, http.StatusNotFound, send(t, c, http.MethodGet, u).status, "GET %s: status", u)
	}
	crawled := crawlPages(t, w, c)
	assert.Truef(t, slices.Equal(sorted(crawled), sorted(w.Pages())), "a crawl found %d URLs, Pages() has %d", len(crawled), len(w.Pages()))
	assert.Empty(t, w.Missing(), "Missing() after a full crawl")
	changed := w.Change(1)
	assert.Lenf(t, changed, 20+12, "Change(1) should return every page and every second URL (32)")
	dup := h1 + "/dup/2.html"
	require.NoError(t, w.ChangePages(dup))
	v, _ := w.Version(h1 + "/p/2.html")
	assert.Equalf(t, 2, v, "ChangePages of %s: page version", dup)
}

// crawlPages fetches every URL reachable from the seeds over the served
// links and redirects that stay on the web and that robots.txt allows,
// and returns them.
func crawlPages(t *testing.T, w *Web, c *http.Client) []string {
	t.Helper()
	seen := map[string]bool{}
	var queue []string
	add := func(base *url.URL, ref string) {
		u, err := base.Parse(ref)
		require.NoErrorf(t, err, "link %q on %s", ref, base)
		u.Fragment = ""
		if s := u.String(); slices.Contains(w.Hosts(), u.Host) && !w.Disallowed(s) && !seen[s] {
			seen[s] = true
			queue = append(queue, s)
		}
	}
	root, _ := url.Parse("http://" + w.Hosts()[0])
	for _, s := range w.Seeds() {
		add(root, s)
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := get(t, c, s)
		base, _ := url.Parse(s)
		if f.location != "" {
			add(base, f.location)
		}
		if strings.HasPrefix(f.ctype, "text/html") {
			for _, ref := range hrefs(f.body) {
				add(base, ref)
			}
		}
	}
	var out []string
	for s := range seen {
		out = append(out, s)
	}
	return out
}

// TestCountsValidatorsAndStatus: every request records the validators it
// carried and the status it got; Answered and Conditional sum them up.
func TestCountsValidatorsAndStatus(t *testing.T) {
	w := startWeb(t, Config{Hosts: 1, PagesPerHost: 10, Validators: true, Base: 19})
	c := newClient()
	even, odd := w.pageURL(0, 2), w.pageURL(0, 3)
	etag, _, _ := w.Validator(even)
	_, lastMod, _ := w.Validator(odd)
	robots := "http://" + w.Hosts()[0] + "/robots.txt"
	send(t, c, http.MethodGet, robots, "If-None-Match", "*")
	send(t, c, http.MethodGet, even)
	send(t, c, http.MethodGet, even, "If-None-Match", etag)
	send(t, c, http.MethodGet, odd, "If-Modified-Since", lastMod)
	send(t, c, http.MethodGet, odd, "If-None-Match", `"a"`, "If-None-Match", `"b"`)

	reqs := w.Requests()
	want := []Request{
		{URL: robots, IfNoneMatch: "*", Status: 200},
		{URL: even, Status: 200},
		{URL: even, IfNoneMatch: etag, Status: 304},
		{URL: odd, IfModifiedSince: lastMod, Status: 304},
		{URL: odd, IfNoneMatch: `"a", "b"`, Status: 200},
	}
	require.Equalf(t, len(want), len(reqs), "number of Requests()")
	for i, r := range reqs {
		wr := want[i]
		assert.Falsef(t, r.URL != wr.URL || r.IfNoneMatch != wr.IfNoneMatch || r.IfModifiedSince != wr.IfModifiedSince || r.Status != wr.Status,
			"Requests()[%d] = %+v, want %+v", i, r, wr)
		assert.Equalf(t, wr.IfNoneMatch != "" || wr.IfModifiedSince != "", r.Conditional(), "Requests()[%d].Conditional()", i)
	}
	assert.Equal(t, []string{even, odd}, w.Answered(http.StatusNotModified), "Answered(304)")
	assert.Equal(t, []string{even, odd}, w.Answered(http.StatusOK), "Answered(200), want robots.txt left out")
	assert.Equal(t, map[string]bool{even: true, odd: true}, w.Conditional(), "Conditional()")
	w.Reset()
	send(t, c, http.MethodGet, even)
	got := w.Conditional()
	assert.Falsef(t, !reflect.DeepEqual(got, map[string]bool{even: false}) || len(w.Answered(http.StatusNotModified)) != 0,
		"after Reset, Conditional() = %v, Answered(304) = %v", got, w.Answered(http.StatusNotModified))
}

// TestChangeWhileServing: changes while clients fetch never serve a body
// with another version's ETag (run it with -race).
func TestChangeWhileServing(t *testing.T) {
	w := startWeb(t, Config{Hosts: 1, PagesPerHost: 20, Validators: true, Base: 20})
	c := newClient()
	var wg sync.WaitGroup
	var fetched atomic.Int64
	stop := make(chan struct{})
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				u := w.pageURL(0, 2*((g+i)%10))
				resp, err := c.Get(u)
				if !assert.NoErrorf(t, err, "GET %s", u) {
					return
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if etag := resp.Header.Get("ETag"); err != nil || etag != etagOf(body) {
					assert.Failf(t, "ETag of another body", "GET %s: ETag %q of another body (read error %v)", u, etag, err)
					return
				}
				fetched.Add(1)
			}
		})
	}
	defer wg.Wait()
	defer close(stop)
	await.For(t, 30*time.Second, 100*time.Microsecond, "400 fetches while the pages change", func() error {
		if t.Failed() {
			return fmt.Errorf("a client failed: %w", await.ErrFinal)
		}
		w.Change(0.3)
		if n := fetched.Load(); n < 400 {
			return fmt.Errorf("%d fetched", n)
		}
		return nil
	})
}

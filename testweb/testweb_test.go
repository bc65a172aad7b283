package testweb

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testUA = "testweb-test/1.0"

func startWeb(t *testing.T, cfg Config) *Web {
	t.Helper()
	return started(t, "Start", func() (*Web, error) { return Start(cfg) })
}

// started returns what start gives, failing the test on its error, and
// closes it when the test ends; an error of Close fails the test too.
func started[T io.Closer](t *testing.T, what string, start func() (T, error)) T {
	t.Helper()
	v, err := start()
	require.NoError(t, err, what)
	t.Cleanup(func() {
		assert.NoError(t, v.Close(), "Close")
	})
	return v
}

// newClient does not follow redirects, so every request is the test's own;
// its timeout bounds every wait.
func newClient() *http.Client {
	return &http.Client{
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

type fetched struct {
	status   int
	ctype    string
	location string
	body     []byte
}

func get(t *testing.T, c *http.Client, rawURL string) fetched {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	require.NoError(t, err, "request %s", rawURL)
	req.Header.Set("User-Agent", testUA)
	resp, err := c.Do(req)
	require.NoError(t, err, "GET %s", rawURL)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err, "GET %s: reading body", rawURL)
	return fetched{resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), body}
}

var hrefRE = regexp.MustCompile(`<a href="([^"]*)"`)

func hrefs(body []byte) []string {
	var out []string
	for _, m := range hrefRE.FindAllSubmatch(body, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestCrawlFetchesExactlyPages crawls the web breadth-first over its served
// links and redirects, skipping what robots.txt disallows and the calendar,
// and checks that it finds exactly Pages(), that the counters agree, and
// that the served bytes are Body's.
func TestCrawlFetchesExactlyPages(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Calendar = true
	w := startWeb(t, cfg)
	c := newClient()

	inScope := map[string]bool{}
	for _, h := range w.Hosts() {
		inScope[h] = true
	}
	depth := map[string]int{}
	var queue []string
	for _, s := range w.Seeds() {
		depth[s] = 0
		queue = append(queue, s)
	}
	var disallowedSeen, calendarSeen, maxDepth int
	forms := map[string]int{}
	enqueue := func(base *url.URL, ref string, d int) {
		classify(forms, base, ref)
		u, err := base.Parse(ref)
		require.NoError(t, err, "link %q on %s", ref, base)
		u.Fragment = ""
		s := u.String()
		switch {
		case !inScope[u.Host]:
			assert.Failf(t, "link leaves the web", "link %q on %s leaves the web", ref, base)
		case w.Disallowed(s):
			disallowedSeen++
		case strings.HasPrefix(u.Path, "/calendar/"):
			calendarSeen++
		default:
			if _, ok := depth[s]; !ok {
				depth[s] = d
				queue = append(queue, s)
			}
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		maxDepth = max(maxDepth, depth[s])
		f := get(t, c, s)
		want, ok := w.Body(s)
		require.Falsef(t, !ok || !bytes.Equal(want, f.body), "served bytes of %s differ from Body (known %v)", s, ok)
		base, _ := url.Parse(s)
		if f.location != "" {
			enqueue(base, f.location, depth[s]+1)
		}
		if strings.HasPrefix(f.ctype, "text/html") {
			for _, ref := range hrefs(f.body) {
				enqueue(base, ref, depth[s]+1)
			}
		}
	}

	var crawled []string
	for s := range depth {
		crawled = append(crawled, s)
	}
	pages := w.Pages()
	assert.Truef(t, slices.Equal(sorted(pages), sorted(crawled)), "crawl found %d URLs, Pages() has %d", len(crawled), len(pages))
	assert.Equal(t, cfg.Hosts*cfg.PagesPerHost+3, len(pages), "len(Pages())")
	assert.Empty(t, w.Missing(), "Missing() after a full crawl")
	assert.Empty(t, w.Duplicates(), "Duplicates() after a crawl that fetched each URL once")
	assert.Empty(t, w.DisallowedHits(), "DisallowedHits()")
	assert.Equal(t, len(pages), w.Total(), "Total()")
	assert.Falsef(t, disallowedSeen == 0 || calendarSeen == 0, "links seen: %d to /private/, %d to the calendar; want some of each", disallowedSeen, calendarSeen)
	assert.LessOrEqualf(t, maxDepth, 12, "deepest page at depth %d, want <= 12 for 400 pages per host", maxDepth)
	for _, form := range []string{"absolute", "cross-host", "root-relative", "relative", "dot-segments", "fragment"} {
		assert.NotZerof(t, forms[form], "no %s link on the web", form)
	}
}

func classify(forms map[string]int, base *url.URL, ref string) {
	if strings.Contains(ref, "#") {
		forms["fragment"]++
	}
	switch {
	case strings.HasPrefix(ref, "http://"):
		forms["absolute"]++
		if u, err := url.Parse(ref); err == nil && u.Host != base.Host {
			forms["cross-host"]++
		}
	case strings.HasPrefix(ref, "/"):
		forms["root-relative"]++
	case strings.HasPrefix(ref, "./"), strings.HasPrefix(ref, "../"):
		forms["dot-segments"]++
	default:
		forms["relative"]++
	}
}

func TestPageShape(t *testing.T) {
	cfg := Config{Hosts: 2, PagesPerHost: 60, LinksPerPage: 30, NavLinks: 8, PageBytes: 4000, CrossHost: true}
	w := startWeb(t, cfg)
	for h := range cfg.Hosts {
		var nav []string
		for n := range cfg.PagesPerHost {
			u := w.pageURL(h, n)
			body, ok := w.Body(u)
			require.Truef(t, ok, "Body(%s) unknown", u)
			assert.Falsef(t, len(body) < cfg.PageBytes || len(body) > cfg.PageBytes+600, "%s is %d bytes, want about %d", u, len(body), cfg.PageBytes)
			assert.Falsef(t, !bytes.Contains(body, []byte("<title>")) || !bytes.Contains(body, []byte("<p>")), "%s lacks a title or paragraphs", u)
			links := hrefs(body)
			want := cfg.LinksPerPage
			if h == 0 && n == 0 {
				want += 3 // /redirect, /missing, /data.bin
			}
			require.Equalf(t, want, len(links), "number of links on %s", u)
			if nav == nil {
				nav = links[:cfg.NavLinks]
			}
			assert.Equalf(t, nav, links[:cfg.NavLinks], "navigation of %s", u)
		}
	}
}

func TestBodiesAreDeterministic(t *testing.T) {
	cfg := Config{Hosts: 3, PagesPerHost: 50, CrossHost: true, Calendar: true, Base: 11,
		CrawlDelay: map[int]time.Duration{1: time.Second}}
	first, err := Start(cfg)
	require.NoError(t, err)
	pages := first.Pages()
	urls := append(slices.Clone(pages), "http://"+first.Hosts()[1]+"/robots.txt", "http://"+first.Hosts()[0]+calendarFirst)
	want := map[string][]byte{}
	for _, u := range urls {
		b, ok := first.Body(u)
		require.Truef(t, ok, "Body(%s) unknown", u)
		want[u] = b
	}
	cfg.Port = first.Config().Port
	require.NoError(t, first.Close())

	second := startWeb(t, cfg)
	require.Equal(t, pages, second.Pages(), "Pages() differ between two starts")
	c := newClient()
	for _, u := range urls {
		assert.Truef(t, bytes.Equal(want[u], get(t, c, u).body), "%s differs between two starts", u)
	}
}

func TestTwoWebsCoexist(t *testing.T) {
	a := startWeb(t, Config{Hosts: 2, PagesPerHost: 10})
	b := startWeb(t, Config{Hosts: 2, PagesPerHost: 10, Base: 12})
	assert.Equal(t, []string{"127.10.0.1", "127.10.0.2"}, a.IPs(), "a.IPs()")
	assert.Equal(t, []string{"127.12.0.1", "127.12.0.2"}, b.IPs(), "b.IPs()")
	c := newClient()
	for _, w := range []*Web{a, b} {
		assert.Equalf(t, http.StatusOK, get(t, c, w.Seeds()[1]).status, "GET %s: status", w.Seeds()[1])
		assert.Equal(t, 1, w.Total(), "Total(): each web counts its own requests")
	}
}

func TestCounting(t *testing.T) {
	w := startWeb(t, Config{Hosts: 2, PagesPerHost: 10})
	c := newClient()
	h0, h1 := w.Hosts()[0], w.Hosts()[1]
	root := "http://" + h0 + "/"
	p1 := "http://" + h1 + "/p/1.html"
	secret := "http://" + h0 + "/private/secret-0.html"
	robots := "http://" + h1 + "/robots.txt"
	nowhere := "http://" + h1 + "/nowhere"
	before := time.Now()
	for _, u := range []string{robots, root, p1, root, secret, robots, nowhere} {
		get(t, c, u)
	}

	for u, want := range map[string]int{root: 2, p1: 1, robots: 2, secret: 1, "http://" + h0 + "/p/2.html": 0} {
		assert.Equalf(t, want, w.Count(u), "Count(%s)", u)
	}
	assert.Equal(t, 7, w.Total(), "Total()")
	assert.Equal(t, int64(2), w.Connections(), "Connections(): one keep-alive connection per host")
	assert.Equal(t, map[string]int{root: 2}, w.Duplicates(), "Duplicates(), want only the root (robots.txt excluded)")
	assert.Equal(t, []string{secret}, w.DisallowedHits(), "DisallowedHits()")
	missing := w.Missing()
	assert.Falsef(t, len(missing) != len(w.Pages())-2 || slices.Contains(missing, root) || slices.Contains(missing, p1),
		"Missing() has %d URLs, want all %d pages but %s and %s", len(missing), len(w.Pages()), root, p1)

	reqs := w.Requests()
	require.Lenf(t, reqs, 7, "Requests()")
	if r := reqs[0]; r.URL != robots || r.Host != h1 || r.UA != testUA || r.Status != http.StatusOK {
		assert.Failf(t, "unexpected first request", "Requests()[0] = %+v", r)
	}
	assert.Equal(t, http.StatusOK, reqs[4].Status, "status of a disallowed page")
	assert.Equal(t, http.StatusNotFound, reqs[6].Status, "status of an unknown path")
	for i, r := range reqs {
		assert.Falsef(t, r.Start.Before(before) || (i > 0 && r.Start.Before(reqs[i-1].Start)), "request %d starts at %v, out of order", i, r.Start)
	}

	w.Reset()
	assert.False(t, w.Total() != 0 || len(w.Requests()) != 0 || len(w.Duplicates()) != 0 || w.Count(root) != 0, "Reset() kept counts")
	assert.Equal(t, w.Pages(), w.Missing(), "after Reset(), Missing() != Pages()")
}

func TestRobots(t *testing.T) {
	w := startWeb(t, Config{Hosts: 3, PagesPerHost: 10,
		CrawlDelay: map[int]time.Duration{1: 2 * time.Second, 2: 1500 * time.Millisecond}})
	c := newClient()
	tests := []struct {
		host  int
		delay string // "" means no Crawl-delay line
	}{{0, ""}, {1, "Crawl-delay: 2\n"}, {2, "Crawl-delay: 1.5\n"}}
	for _, tt := range tests {
		f := get(t, c, "http://"+w.Hosts()[tt.host]+"/robots.txt")
		body := string(f.body)
		assert.Falsef(t, f.status != http.StatusOK || !strings.HasPrefix(body, "User-agent: *\nDisallow: /private/\n"),
			"host %d robots.txt: status %d, body %q", tt.host, f.status, body)
		assert.Falsef(t, tt.delay == "" && strings.Contains(body, "Crawl-delay") || tt.delay != "" && !strings.Contains(body, tt.delay),
			"host %d robots.txt = %q, want Crawl-delay line %q", tt.host, body, tt.delay)
	}
	assert.True(t, w.Disallowed("http://"+w.Hosts()[2]+"/private/secret-2.html"), "Disallowed(/private/secret-2.html) = false")
	assert.False(t, w.Disallowed(w.Seeds()[2]), "Disallowed(root) = true")
}

func TestSpecialPaths(t *testing.T) {
	w := startWeb(t, Config{Hosts: 2, PagesPerHost: 10, Calendar: true})
	c := newClient()
	h0, h1 := "http://"+w.Hosts()[0], "http://"+w.Hosts()[1]
	tests := []struct {
		url, ctype, location string
		status               int
		known                bool // Body knows it
	}{
		{h0 + "/redirect", "text/html", "/p/1.html", http.StatusMovedPermanently, true},
		{h0 + "/missing", "text/html", "", http.StatusNotFound, true},
		{h0 + "/data.bin", "application/octet-stream", "", http.StatusOK, true},
		{h0 + "/private/anything", "text/html", "", http.StatusOK, true},
		{h0 + "/calendar/2026/01", "text/html", "", http.StatusOK, true},
		{h0 + "/calendar/2026/13", "text/plain", "", http.StatusNotFound, false},
		{h0 + "/p/10.html", "text/plain", "", http.StatusNotFound, false},
		{h0 + "/p/01.html", "text/plain", "", http.StatusNotFound, false},
		{h1 + "/redirect", "text/plain", "", http.StatusNotFound, false},
		{h1 + "/calendar/2026/01", "text/plain", "", http.StatusNotFound, false},
		{h1 + "/p/9.html?q=1", "text/html", "", http.StatusOK, true},
	}
	for _, tt := range tests {
		f := get(t, c, tt.url)
		assert.Falsef(t, f.status != tt.status || !strings.HasPrefix(f.ctype, tt.ctype) || f.location != tt.location,
			"GET %s: %d %q Location %q, want %d %q Location %q",
			tt.url, f.status, f.ctype, f.location, tt.status, tt.ctype, tt.location)
		body, ok := w.Body(tt.url)
		assert.Falsef(t, ok != tt.known || ok && !bytes.Equal(body, f.body),
			"Body(%s): known %v (want %v), equal to served %v", tt.url, ok, tt.known, bytes.Equal(body, f.body))
	}
	data, _ := w.Body(h0 + "/data.bin")
	assert.Equal(t, dataBinSize, len(data), "size of data.bin")
	for _, p := range []string{"/redirect", "/missing", "/data.bin"} {
		assert.Containsf(t, w.Pages(), h0+p, "Pages() lacks %s", h0+p)
	}
}

// TestCalendarIsEndless follows "next month" links: each leads to a new page.
func TestCalendarIsEndless(t *testing.T) {
	w := startWeb(t, Config{Hosts: 1, PagesPerHost: 10, Calendar: true})
	c := newClient()
	next := regexp.MustCompile(`<a href="([^"]*)">next month</a>`)
	host := "http://" + w.Hosts()[0]
	u := host + calendarFirst
	seen := map[string]bool{}
	for range 40 {
		require.Falsef(t, seen[u], "calendar loops back to %s", u)
		seen[u] = true
		f := get(t, c, u)
		m := next.FindSubmatch(f.body)
		require.Falsef(t, f.status != http.StatusOK || m == nil, "GET %s: status %d, next month link %v", u, f.status, m != nil)
		u = host + string(m[1])
	}
	assert.Equal(t, host+"/calendar/2029/05", u, "40 months after 2026/01")
	for _, p := range w.Pages() {
		assert.NotContainsf(t, p, "/calendar/", "Pages() holds calendar page %s", p)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name  string
		cfg   Config
		field string // "" means valid
	}{
		{"zero value takes defaults", Config{}, ""},
		{"default", DefaultConfig(), ""},
		{"every non-root page duplicated", Config{Hosts: 2, PagesPerHost: 10, Duplicates: 18}, ""},
		{"negative hosts", Config{Hosts: -1}, "Hosts"},
		{"too many hosts", Config{Hosts: maxHosts + 1}, "Hosts"},
		{"one page", Config{PagesPerHost: 1}, "PagesPerHost"},
		{"one nav link", Config{NavLinks: 1}, "NavLinks"},
		{"no room for content links", Config{LinksPerPage: 11, NavLinks: 10}, "LinksPerPage"},
		{"negative size", Config{PageBytes: -5}, "PageBytes"},
		{"port out of range", Config{Port: 70000}, "Port"},
		{"negative duplicates", Config{Duplicates: -1}, "Duplicates"},
		{"more duplicates than non-root pages", Config{Hosts: 2, PagesPerHost: 10, Duplicates: 19}, "Duplicates"},
		{"delay for unknown host", Config{Hosts: 2, CrawlDelay: map[int]time.Duration{2: time.Second}}, "CrawlDelay"},
		{"negative delay", Config{CrawlDelay: map[int]time.Duration{0: -time.Second}}, "CrawlDelay"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.field == "" {
				assert.NoError(t, err, "Validate()")
				return
			}
			assert.ErrorContainsf(t, err, tt.field, "Validate() = %v, want an error naming %s", err, tt.field)
			if w, err := Start(tt.cfg); err == nil {
				w.Close()
				assert.Fail(t, "Start accepted an invalid config")
			}
		})
	}
}

func TestCloseStopsServing(t *testing.T) {
	w, err := Start(Config{Hosts: 2, PagesPerHost: 10})
	require.NoError(t, err)
	seed := w.Seeds()[0]
	get(t, newClient(), seed)
	require.NoError(t, w.Close())
	assert.NoError(t, w.Close(), "second Close()")
	_, err = newClient().Get(seed)
	assert.Error(t, err, "GET after Close succeeded")
}

// TestNoExtras: without the extras every host has the same pages, and the
// extras' paths are plain 404s nobody links to.
func TestNoExtras(t *testing.T) {
	w, err := Start(Config{Hosts: 2, PagesPerHost: 10, NoExtras: true, Base: 29})
	require.NoError(t, err)
	defer w.Close()
	assert.Equal(t, 20, len(w.Pages()), "number of pages (no redirect, 404 or binary on host 0)")
	root, _ := w.Body(w.Seeds()[0])
	for _, p := range []string{pathRedirect, "missing", pathDataBin} {
		assert.Falsef(t, strings.Contains(string(root), p+`"`), "host 0's root still links to %s", p)
	}
	resp, err := http.Get("http://" + w.Hosts()[0] + pathRedirect)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equalf(t, http.StatusNotFound, resp.StatusCode, "%s: status", pathRedirect)
}

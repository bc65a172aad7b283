package fetch

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/urlrule"
)

// testConfig is a campaign whose only seed is srvURL, with the address
// guard on and only the loopback test server let through.
func testConfig(srvURL string) campaign.Config {
	return campaign.Config{
		ID:         "test",
		Seeds:      []string{srvURL + "/"},
		AllowAddrs: []string{"127.0.0.1"},
	}.WithDefaults()
}

func newTestFetcher(t *testing.T, cfg campaign.Config) *Fetcher {
	t.Helper()
	f, err := New(cfg)
	must(t, err == nil, err)
	t.Cleanup(f.Close)
	return f
}

// testCtx bounds every test's waits.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func linkURLs(links []urlrule.Link) []string {
	var out []string
	for _, l := range links {
		out = append(out, l.URL)
	}
	return out
}

const testPage = `<!doctype html><html><head>
<title>t</title>
<link rel="canonical" href="/canonical">
<link rel="stylesheet" href="/style.css">
<link rel="alternate" hreflang="fr" href="/fr/">
<meta http-equiv="Refresh" content="5; URL='/refreshed'">
</head><body>
<a href="/a">a</a>
<a href="b?utm_source=x&amp;k=1#frag">b</a>
<a href="/a">a again</a>
<a href="/nofollow" rel="external NoFollow">nf</a>
<a href="mailto:x@example.com">mail</a>
<a href="javascript:void(0)">js</a>
<a href="http://other.example/x">other host</a>
<map><area href="/area" alt=""></map>
<iframe src="/iframe"></iframe>
<a href="   /spaced  ">spaced</a>
</body></html>`

func TestFetchPage(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, testPage)
	}))
	defer srv.Close()
	cfg := testConfig(srv.URL)
	cfg.DropParams = []string{"utm_source"}
	f := newTestFetcher(t, cfg)

	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/dir/page", Depth: 2, Parent: srv.URL + "/", Attempt: 1, MaxAttempts: 3})
	must(t, res.Page != nil && res.Err == nil, res.Err)
	p := res.Page
	equal(t, p.Status, 200)
	equal(t, p.StatusLine, "HTTP/1.1 200 OK")
	check(t, bytes.Contains(p.Header, []byte("Content-Type: text/html; charset=utf-8\r\n")), string(p.Header))
	check(t, !bytes.HasSuffix(p.Header, []byte("\r\n\r\n")), "header block ends with one line end")
	check(t, bytes.HasPrefix(p.Request, []byte("GET /dir/page HTTP/1.1\r\n")), string(p.Request))
	check(t, bytes.Contains(p.Request, []byte("User-Agent: "+campaign.DefaultUserAgent+"\r\n")), string(p.Request))
	check(t, bytes.Contains(p.Request, []byte("Accept-Encoding: gzip\r\n")), string(p.Request))
	equal(t, string(p.Body), testPage)
	equal(t, p.IP, "127.0.0.1")
	equal(t, p.Campaign, "test")
	equal(t, p.Depth, 2)
	equal(t, p.Parent, srv.URL+"/")
	check(t, !p.FetchedAt.IsZero())
	check(t, !res.Retry && !res.NoIndex && !res.NoFollow)

	want := []string{"/a", "/dir/b?k=1", "/area", "/iframe", "/spaced", "/canonical", "/fr/", "/refreshed", "/style.css"}
	for i := range want {
		want[i] = srv.URL + want[i]
	}
	got := linkURLs(res.Links)
	// Document order is kept within a kind; compare as sets.
	equal(t, len(got), len(want), got)
	set := map[string]bool{}
	for _, g := range got {
		set[g] = true
	}
	for _, w := range want {
		check(t, set[w], "missing link ", w, " in ", got)
	}
	for _, l := range res.Links {
		equal(t, l.Hops, 0)
		if l.URL == srv.URL+"/style.css" {
			// The stylesheet is the page's embed: at the page's depth.
			equal(t, l.Embeds, 1)
			equal(t, l.Depth(2), 2)
			continue
		}
		equal(t, l.Embeds, 0, l.URL)
		equal(t, l.Depth(2), 3)
	}
}

func TestExtractFrames(t *testing.T) {
	base, _ := url.Parse("http://e.com/")
	urls, _, _, _ := extractLinks([]byte(`<html><frameset><frame src="/f1"><frame src="f2"></frameset></html>`), base, nil, false)
	equal(t, urls, []string{"http://e.com/f1", "http://e.com/f2"})
}

func TestFetchBase(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<html><head><base href="/other/dir/"></head><body><a href="x">x</a><a href="../y">y</a></body></html>`)
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/p"})
	equal(t, linkURLs(res.Links), []string{srv.URL + "/other/dir/x", srv.URL + "/other/y"})
}

func TestFetchMetaRobots(t *testing.T) {
	pages := map[string]string{
		"/noindex":  `<meta name="robots" content="noindex"><a href="/a">a</a>`,
		"/nofollow": `<meta name="ROBOTS" content="NoFollow"><a href="/a">a</a>`,
		"/none":     `<meta name="drover" content="none"><a href="/a">a</a>`,
		"/other":    `<meta name="otherbot" content="none"><a href="/a">a</a>`,
		"/xrobots":  `<a href="/a">a</a>`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/xrobots" {
			w.Header().Add("X-Robots-Tag", "otherbot: noindex")
			w.Header().Add("X-Robots-Tag", "drover: nofollow")
		}
		io.WriteString(w, pages[r.URL.Path])
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	cases := []struct {
		path              string
		noIndex, noFollow bool
	}{
		{"/noindex", true, false},
		{"/nofollow", false, true},
		{"/none", true, true},
		{"/other", false, false},
		{"/xrobots", false, true},
	}
	for _, c := range cases {
		res := f.Fetch(testCtx(t), Request{URL: srv.URL + c.path})
		must(t, res.Page != nil, c.path)
		equal(t, res.NoIndex, c.noIndex, c.path)
		equal(t, res.NoFollow, c.noFollow, c.path)
		equal(t, len(res.Links) == 0, c.noFollow, c.path)
		equal(t, len(res.Page.Body) > 0, true, "the page is stored anyway")
	}
}

func TestFetchGzip(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	io.WriteString(zw, `<html><a href="/zipped">z</a></html>`)
	zw.Close()
	var gotAE atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotAE.Store(r.Header.Get("Accept-Encoding"))
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(gz.Bytes())
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	must(t, res.Page != nil)
	equal(t, gotAE.Load(), "gzip")
	equal(t, res.Page.Body, gz.Bytes(), "the body is stored as sent")
	equal(t, res.Page.ContentEncoding, "gzip")
	equal(t, linkURLs(res.Links), []string{srv.URL + "/zipped"})
}

func TestFetchSniffsHTML(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // no Content-Type, no sniffing by the server
		switch r.URL.Path {
		case "/html":
			io.WriteString(w, `<!DOCTYPE html><html><a href="/x">x</a></html>`)
		default:
			io.WriteString(w, `{"href": "/x"}`)
		}
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	equal(t, len(f.Fetch(testCtx(t), Request{URL: srv.URL + "/html"}).Links), 1)
	equal(t, len(f.Fetch(testCtx(t), Request{URL: srv.URL + "/json"}).Links), 0)
}

// TestFetchRawHead checks that the page keeps the response head exactly
// as the server sent it, odd spellings included.
func TestFetchRawHead(t *testing.T) {
	srvURL := rawServer(t, func(c *net.TCPConn) {
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n"+
			"HTTP/1.1 200 Fine Thanks\r\nx-weird-CASE:   spaced  \r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nhi")
	})
	f := newTestFetcher(t, testConfig(srvURL))
	res := f.Fetch(testCtx(t), Request{URL: srvURL + "/"})
	must(t, res.Page != nil && res.Err == nil, res.Err)
	equal(t, res.Page.StatusLine, "HTTP/1.1 200 Fine Thanks")
	equal(t, string(res.Page.Header), "x-weird-CASE:   spaced  \r\nContent-Length: 2\r\nContent-Type: text/plain\r\n")
	equal(t, string(res.Page.Body), "hi")
}

// TestFetchReusesConnections checks keep-alive, and that the recording of a
// reused connection holds the second exchange only.
func TestFetchReusesConnections(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Path", r.URL.Path)
		io.WriteString(w, "ok "+r.URL.Path)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	for i := range 5 {
		path := fmt.Sprintf("/p%d", i)
		res := f.Fetch(testCtx(t), Request{URL: srv.URL + path})
		must(t, res.Page != nil && res.Err == nil, res.Err)
		check(t, bytes.HasPrefix(res.Page.Request, []byte("GET "+path+" HTTP/1.1\r\n")), string(res.Page.Request))
		check(t, bytes.Contains(res.Page.Header, []byte("X-Path: "+path+"\r\n")), string(res.Page.Header))
		equal(t, string(res.Page.Body), "ok "+path)
	}
	equal(t, conns.Load(), int32(1))
}

// rawRedirect answers a 302 to loc as it is, where http.Redirect would
// clean it up first.
func rawRedirect(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusFound)
}

func TestFetchRedirect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/moved":
			http.Redirect(w, r, "/target?utm_source=x", http.StatusMovedPermanently)
		case "/away":
			http.Redirect(w, r, "http://elsewhere.example/", http.StatusFound)
		case "/bad":
			rawRedirect(w, "javascript:alert(1)")
		default:
			io.WriteString(w, "target")
		}
	}))
	defer srv.Close()
	cfg := testConfig(srv.URL)
	cfg.DropParams = []string{"utm_source"}
	cfg.MaxRedirects = new(3)
	f := newTestFetcher(t, cfg)
	ctx := testCtx(t)

	res := f.Fetch(ctx, Request{URL: srv.URL + "/moved", Depth: 1, Hops: 1})
	must(t, res.Page != nil && res.Err == nil, res.Err)
	equal(t, res.Page.Status, 301)
	equal(t, res.Links, []urlrule.Link{{URL: srv.URL + "/target", Hops: 2}})
	equal(t, res.Links[0].Depth(1), 1, "a redirect does not take the crawl deeper")
	check(t, len(res.Page.Body) > 0, "the redirect's body is kept")

	res = f.Fetch(ctx, Request{URL: srv.URL + "/moved", Hops: 3})
	equal(t, len(res.Links), 0)
	check(t, strings.Contains(res.Page.Err, "redirect hop limit"), res.Page.Err)
	equal(t, res.Page.Status, 301)
	check(t, !res.Retry)

	res = f.Fetch(ctx, Request{URL: srv.URL + "/away"})
	equal(t, len(res.Links), 0, "out of scope")
	res = f.Fetch(ctx, Request{URL: srv.URL + "/bad"})
	equal(t, len(res.Links), 0)
	check(t, res.Page.Err != "", "a bad Location is recorded")
}

func TestFetchRetry(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/busy":
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusServiceUnavailable)
		case "/slowdown":
			w.Header().Set("Retry-After", time.Now().Add(90*time.Minute).UTC().Format(http.TimeFormat))
			w.WriteHeader(http.StatusTooManyRequests)
		case "/missing":
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	cfg := testConfig(srv.URL)
	f := newTestFetcher(t, cfg)
	ctx := testCtx(t)

	res := f.Fetch(ctx, Request{URL: srv.URL + "/busy", Attempt: 1, MaxAttempts: 3})
	check(t, res.Retry && res.Page == nil && res.Err != nil)
	equal(t, res.RetryAfter, 120*time.Second)
	equal(t, res.Status, 503, "the scheduler slows the host on 429 and 503")

	res = f.Fetch(ctx, Request{URL: srv.URL + "/slowdown", Attempt: 2, MaxAttempts: 3})
	check(t, res.Retry)
	equal(t, res.RetryAfter, MaxRetryAfter, "capped")
	equal(t, res.Status, 429)

	res = f.Fetch(ctx, Request{URL: srv.URL + "/busy", Attempt: 3, MaxAttempts: 3})
	must(t, res.Page != nil && !res.Retry)
	equal(t, res.Page.Status, 503)
	check(t, res.Page.Err != "")

	res = f.Fetch(ctx, Request{URL: srv.URL + "/missing", Attempt: 1, MaxAttempts: 3})
	must(t, res.Page != nil && !res.Retry && res.Err == nil, "4xx is a normal page")
	equal(t, res.Page.Status, 404)

	// A network error: the server is gone.
	srv.Close()
	res = f.Fetch(ctx, Request{URL: srv.URL + "/busy", Attempt: 1, MaxAttempts: 3})
	check(t, res.Retry && res.Page == nil && res.Err != nil, res)
	res = f.Fetch(ctx, Request{URL: srv.URL + "/busy", Attempt: 3, MaxAttempts: 3})
	must(t, res.Page != nil && !res.Retry)
	equal(t, res.Page.Status, 0)
	check(t, res.Page.Err != "")
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		v    string
		want time.Duration
	}{
		{"", 0},
		{"0", 0},
		{"30", 30 * time.Second},
		{" 30 ", 30 * time.Second},
		{"-5", 0},
		{"99999999999999999999", 0},
		{"7200", time.Hour},
		{"Wed, 01 Jan 2025 12:05:00 GMT", 5 * time.Minute},
		{"Wed, 01 Jan 2025 11:00:00 GMT", 0},
		{"soon", 0},
	}
	for _, c := range cases {
		equal(t, retryAfter(c.v, now), c.want, c.v)
	}
}

func TestFetchCallerCancel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	res := f.Fetch(ctx, Request{URL: srv.URL + "/", Attempt: 3, MaxAttempts: 3})
	check(t, res.Retry && res.Page == nil, "a cancelled caller learns nothing: retry")
}

func TestFetchRobots(t *testing.T) {
	var pageHits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			http.Redirect(w, r, "/real-robots.txt", http.StatusMovedPermanently)
		case "/real-robots.txt":
			io.WriteString(w, "User-agent: *\nDisallow: /private\nCrawl-delay: 3\nSitemap: http://x.example/s.xml\n")
		default:
			pageHits.Add(1)
		}
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	ctx := testCtx(t)
	rr := f.FetchRobots(ctx, srv.URL)
	must(t, rr.Err == nil, rr.Err)
	equal(t, rr.Status, 200)
	r := urlrule.ParseRobots(rr.Status, rr.Body, rr.Err)
	check(t, !r.Allowed("/private/x") && r.Allowed("/public"))
	equal(t, r.CrawlDelay(), 3*time.Second)
	equal(t, r.Sitemaps(), []string{"http://x.example/s.xml"})

	res := f.Fetch(ctx, Request{URL: srv.URL + "/private/x", Robots: r, Attempt: 1, MaxAttempts: 3})
	must(t, res.Page != nil && !res.Retry)
	check(t, strings.Contains(res.Page.Err, "robots.txt"), res.Page.Err)
	equal(t, pageHits.Load(), int32(0), "a disallowed URL is never requested")

	srv.Close()
	rr = f.FetchRobots(ctx, srv.URL)
	check(t, rr.Err != nil)
	check(t, urlrule.ParseRobots(rr.Status, rr.Body, rr.Err).Unreachable)
}

func TestFetchHTTPS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="/secure">s</a>`)
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	f.rootCAs = x509.NewCertPool()
	f.rootCAs.AddCert(srv.Certificate())
	for i := range 2 {
		res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/p"})
		must(t, res.Page != nil && res.Err == nil, res.Err)
		equal(t, res.Page.StatusLine, "HTTP/1.1 200 OK", i)
		check(t, bytes.HasPrefix(res.Page.Request, []byte("GET /p HTTP/1.1\r\n")), "plain-text request recorded over TLS: ", string(res.Page.Request))
		equal(t, linkURLs(res.Links), []string{srv.URL + "/secure"})
	}
	// An untrusted certificate is a network error.
	f2 := newTestFetcher(t, testConfig(srv.URL))
	res := f2.Fetch(testCtx(t), Request{URL: srv.URL + "/p", Attempt: 1, MaxAttempts: 3})
	check(t, res.Retry && res.Err != nil)
}

// A page's links have its score by default (InheritScore), or the link
// scorer's; a redirect's target keeps its page's score.
func TestLinkScores(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			http.Redirect(w, r, "/target", http.StatusMovedPermanently)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="/news/1">n</a> <a href="/about">a</a>`)
	}))
	defer srv.Close()
	news := func(req Request, link string) float64 {
		if strings.Contains(link, "/news/") {
			return req.Score + 10
		}
		return -1
	}
	f := newTestFetcher(t, testConfig(srv.URL))
	for _, c := range []struct {
		name   string
		scorer LinkScorer
		want   map[string]float64
	}{
		{"default", nil, map[string]float64{"/news/1": 3, "/about": 3}},
		{"scorer", news, map[string]float64{"/news/1": 13, "/about": -1}},
	} {
		req := Request{URL: srv.URL + "/", Score: 3, Attempt: 1, MaxAttempts: 1}
		res := f.Fetch(testCtx(t), req)
		must(t, res.Page != nil && res.Err == nil, res.Err)
		ScoreLinks(req, res.Links, c.scorer)
		got := map[string]float64{}
		for _, l := range res.Links {
			got[strings.TrimPrefix(l.URL, srv.URL)] = l.Score
		}
		equal(t, got, c.want, c.name)
		req = Request{URL: srv.URL + "/moved", Score: 3, Attempt: 1, MaxAttempts: 1}
		res = f.Fetch(testCtx(t), req)
		must(t, len(res.Links) == 1, res.Links)
		ScoreLinks(req, res.Links, c.scorer)
		equal(t, res.Links[0].Score, 3.0, c.name+": redirect")
	}
}

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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.True(t, err == nil, err)
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
	require.True(t, res.Page != nil && res.Err == nil, res.Err)
	p := res.Page
	assert.Equal(t, 200, p.Status)
	assert.Equal(t, "HTTP/1.1 200 OK", p.StatusLine)
	assert.True(t, bytes.Contains(p.Header, []byte("Content-Type: text/html; charset=utf-8\r\n")), string(p.Header))
	assert.True(t, !bytes.HasSuffix(p.Header, []byte("\r\n\r\n")), "header block ends with one line end")
	assert.True(t, bytes.HasPrefix(p.Request, []byte("GET /dir/page HTTP/1.1\r\n")), string(p.Request))
	assert.True(t, bytes.Contains(p.Request, []byte("User-Agent: "+campaign.DefaultUserAgent+"\r\n")), string(p.Request))
	assert.True(t, bytes.Contains(p.Request, []byte("Accept-Encoding: gzip\r\n")), string(p.Request))
	assert.Equal(t, testPage, string(p.Body))
	assert.Equal(t, "127.0.0.1", p.IP)
	assert.Equal(t, "test", p.Campaign)
	assert.Equal(t, 2, p.Depth)
	assert.Equal(t, srv.URL+"/", p.Parent)
	assert.True(t, !p.FetchedAt.IsZero())
	assert.True(t, !res.Retry && !res.NoIndex && !res.NoFollow)

	want := []string{"/a", "/dir/b?k=1", "/area", "/iframe", "/spaced", "/canonical", "/fr/", "/refreshed", "/style.css"}
	for i := range want {
		want[i] = srv.URL + want[i]
	}
	got := linkURLs(res.Links)
	// Document order is kept within a kind; compare as sets.
	assert.Equal(t, len(want), len(got), got)
	set := map[string]bool{}
	for _, g := range got {
		set[g] = true
	}
	for _, w := range want {
		assert.True(t, set[w], fmt.Sprint("missing link ", w, " in ", got))
	}
	for _, l := range res.Links {
		assert.Equal(t, 0, l.Hops)
		if l.URL == srv.URL+"/style.css" {
			// The stylesheet is the page's embed: at the page's depth.
			assert.Equal(t, 1, l.Embeds)
			assert.Equal(t, 2, l.Depth(2))
			continue
		}
		assert.Equal(t, 0, l.Embeds, l.URL)
		assert.Equal(t, 3, l.Depth(2))
	}
}

func TestExtractFrames(t *testing.T) {
	base, _ := url.Parse("http://e.com/")
	urls, _, _, _ := extractLinks([]byte(`<html><frameset><frame src="/f1"><frame src="f2"></frameset></html>`), base, nil, false)
	assert.Equal(t, []string{"http://e.com/f1", "http://e.com/f2"}, urls)
}

func TestFetchBase(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<html><head><base href="/other/dir/"></head><body><a href="x">x</a><a href="../y">y</a></body></html>`)
	}))
	defer srv.Close()
	f := newTestFetcher(t, testConfig(srv.URL))
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/p"})
	assert.Equal(t, []string{srv.URL + "/other/dir/x", srv.URL + "/other/y"}, linkURLs(res.Links))
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
		require.True(t, res.Page != nil, c.path)
		assert.Equal(t, c.noIndex, res.NoIndex, c.path)
		assert.Equal(t, c.noFollow, res.NoFollow, c.path)
		assert.Equal(t, c.noFollow, len(res.Links) == 0, c.path)
		assert.Equal(t, true, len(res.Page.Body) > 0, "the page is stored anyway")
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
	require.True(t, res.Page != nil)
	assert.Equal(t, "gzip", gotAE.Load())
	assert.Equal(t, gz.Bytes(), res.Page.Body, "the body is stored as sent")
	assert.Equal(t, "gzip", res.Page.ContentEncoding)
	assert.Equal(t, []string{srv.URL + "/zipped"}, linkURLs(res.Links))
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
	assert.Equal(t, 1, len(f.Fetch(testCtx(t), Request{URL: srv.URL + "/html"}).Links))
	assert.Equal(t, 0, len(f.Fetch(testCtx(t), Request{URL: srv.URL + "/json"}).Links))
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
	require.True(t, res.Page != nil && res.Err == nil, res.Err)
	assert.Equal(t, "HTTP/1.1 200 Fine Thanks", res.Page.StatusLine)
	assert.Equal(t, "x-weird-CASE:   spaced  \r\nContent-Length: 2\r\nContent-Type: text/plain\r\n", string(res.Page.Header))
	assert.Equal(t, "hi", string(res.Page.Body))
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
		require.True(t, res.Page != nil && res.Err == nil, res.Err)
		assert.True(t, bytes.HasPrefix(res.Page.Request, []byte("GET "+path+" HTTP/1.1\r\n")), string(res.Page.Request))
		assert.True(t, bytes.Contains(res.Page.Header, []byte("X-Path: "+path+"\r\n")), string(res.Page.Header))
		assert.Equal(t, "ok "+path, string(res.Page.Body))
	}
	assert.Equal(t, int32(1), conns.Load())
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
	require.True(t, res.Page != nil && res.Err == nil, res.Err)
	assert.Equal(t, 301, res.Page.Status)
	assert.Equal(t, []urlrule.Link{{URL: srv.URL + "/target", Hops: 2}}, res.Links)
	assert.Equal(t, 1, res.Links[0].Depth(1), "a redirect does not take the crawl deeper")
	assert.True(t, len(res.Page.Body) > 0, "the redirect's body is kept")

	res = f.Fetch(ctx, Request{URL: srv.URL + "/moved", Hops: 3})
	assert.Equal(t, 0, len(res.Links))
	assert.True(t, strings.Contains(res.Page.Err, "redirect hop limit"), res.Page.Err)
	assert.Equal(t, 301, res.Page.Status)
	assert.True(t, !res.Retry)

	res = f.Fetch(ctx, Request{URL: srv.URL + "/away"})
	assert.Equal(t, 0, len(res.Links), "out of scope")
	res = f.Fetch(ctx, Request{URL: srv.URL + "/bad"})
	assert.Equal(t, 0, len(res.Links))
	assert.True(t, res.Page.Err != "", "a bad Location is recorded")
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
	assert.True(t, res.Retry && res.Page == nil && res.Err != nil)
	assert.Equal(t, 120*time.Second, res.RetryAfter)
	assert.Equal(t, 503, res.Status, "the scheduler slows the host on 429 and 503")

	res = f.Fetch(ctx, Request{URL: srv.URL + "/slowdown", Attempt: 2, MaxAttempts: 3})
	assert.True(t, res.Retry)
	assert.Equal(t, MaxRetryAfter, res.RetryAfter, "capped")
	assert.Equal(t, 429, res.Status)

	res = f.Fetch(ctx, Request{URL: srv.URL + "/busy", Attempt: 3, MaxAttempts: 3})
	require.True(t, res.Page != nil && !res.Retry)
	assert.Equal(t, 503, res.Page.Status)
	assert.True(t, res.Page.Err != "")

	res = f.Fetch(ctx, Request{URL: srv.URL + "/missing", Attempt: 1, MaxAttempts: 3})
	require.True(t, res.Page != nil && !res.Retry && res.Err == nil, "4xx is a normal page")
	assert.Equal(t, 404, res.Page.Status)

	// A network error: the server is gone.
	srv.Close()
	res = f.Fetch(ctx, Request{URL: srv.URL + "/busy", Attempt: 1, MaxAttempts: 3})
	assert.True(t, res.Retry && res.Page == nil && res.Err != nil, res)
	res = f.Fetch(ctx, Request{URL: srv.URL + "/busy", Attempt: 3, MaxAttempts: 3})
	require.True(t, res.Page != nil && !res.Retry)
	assert.Equal(t, 0, res.Page.Status)
	assert.True(t, res.Page.Err != "")
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
		assert.Equal(t, c.want, retryAfter(c.v, now), c.v)
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
	assert.True(t, res.Retry && res.Page == nil, "a cancelled caller learns nothing: retry")
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
	require.True(t, rr.Err == nil, rr.Err)
	assert.Equal(t, 200, rr.Status)
	r := urlrule.ParseRobots(rr.Status, rr.Body, rr.Err)
	assert.True(t, !r.Allowed("/private/x") && r.Allowed("/public"))
	assert.Equal(t, 3*time.Second, r.CrawlDelay())
	assert.Equal(t, []string{"http://x.example/s.xml"}, r.Sitemaps())

	res := f.Fetch(ctx, Request{URL: srv.URL + "/private/x", Robots: r, Attempt: 1, MaxAttempts: 3})
	require.True(t, res.Page != nil && !res.Retry)
	assert.True(t, strings.Contains(res.Page.Err, "robots.txt"), res.Page.Err)
	assert.Equal(t, int32(0), pageHits.Load(), "a disallowed URL is never requested")

	srv.Close()
	rr = f.FetchRobots(ctx, srv.URL)
	assert.True(t, rr.Err != nil)
	assert.True(t, urlrule.ParseRobots(rr.Status, rr.Body, rr.Err).Unreachable)
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
		require.True(t, res.Page != nil && res.Err == nil, res.Err)
		assert.Equal(t, "HTTP/1.1 200 OK", res.Page.StatusLine, i)
		assert.True(t, bytes.HasPrefix(res.Page.Request, []byte("GET /p HTTP/1.1\r\n")), fmt.Sprint("plain-text request recorded over TLS: ", string(res.Page.Request)))
		assert.Equal(t, []string{srv.URL + "/secure"}, linkURLs(res.Links))
	}
	// An untrusted certificate is a network error.
	f2 := newTestFetcher(t, testConfig(srv.URL))
	res := f2.Fetch(testCtx(t), Request{URL: srv.URL + "/p", Attempt: 1, MaxAttempts: 3})
	assert.True(t, res.Retry && res.Err != nil)
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
		require.True(t, res.Page != nil && res.Err == nil, res.Err)
		ScoreLinks(req, res.Links, c.scorer)
		got := map[string]float64{}
		for _, l := range res.Links {
			got[strings.TrimPrefix(l.URL, srv.URL)] = l.Score
		}
		assert.Equal(t, c.want, got, c.name)
		req = Request{URL: srv.URL + "/moved", Score: 3, Attempt: 1, MaxAttempts: 1}
		res = f.Fetch(testCtx(t), req)
		require.True(t, len(res.Links) == 1, res.Links)
		ScoreLinks(req, res.Links, c.scorer)
		assert.Equal(t, 3.0, res.Links[0].Score, c.name+": redirect")
	}
}

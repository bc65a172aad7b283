package fetch

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/urlrule"
)

func TestSrcsetURLs(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"a.png", []string{"a.png"}},
		{"a.png 1x, b.png 2x", []string{"a.png", "b.png"}},
		{"  a.png   480w ,\n\tb.png 800w  ", []string{"a.png", "b.png"}},
		// A URL with commas inside, and one whose trailing comma ends it.
		{"/img,v=1.png 1x,/img,v=2.png 2x", []string{"/img,v=1.png", "/img,v=2.png"}},
		// Only a trailing comma ends a URL: this is one URL (the spec's
		// "parse a srcset attribute", as browsers read it).
		{"a.png,b.png 2x", []string{"a.png,b.png"}},
		// A descriptor with a parenthesised comma does not split.
		{"a.png foo(1, 2), b.png 2x", []string{"a.png", "b.png"}},
		{"", nil},
		{" , ,, ", nil},
	} {
		assert.Equal(t, c.want, srcsetURLs(c.in), fmt.Sprint("srcset ", c.in))
	}
}

func TestCSSURLs(t *testing.T) {
	base, _ := url.Parse("http://example.com/css/site.css")
	for _, c := range []struct {
		css  string
		want []string
	}{
		{`body{background:url(bg.png)}`, []string{"/css/bg.png"}},
		{`a{b:url( "q.png" )} c{d:URL('/r.png')}`, []string{"/css/q.png", "/r.png"}},
		{`@import "base.css"; @import url(print.css) print; @IMPORT 'x.css';`, []string{"/css/base.css", "/css/print.css", "/css/x.css"}},
		// Strings that are not an @import's, and comments, hold no URL.
		{`a::after{content:"not.png"} /* url(commented.png) */ b{c:url(real.png)}`, []string{"/css/real.png"}},
		// Escapes: a hex escape with its space, an escaped quote.
		{`a{b:url(sp\20 ace.png)} c{d:url("q\"uote.png")}`, []string{"/css/sp%20ace.png", "/css/q%22uote.png"}},
		{`@font-face{src:url(f.woff2) format("woff2"),url(data:font/woff;base64,AAAA)}`, []string{"/css/f.woff2"}},
		// Broken CSS ends without a URL, or with what it had.
		{`a{b:url(unterminated`, []string{"/css/unterminated"}},
		{"\x00\xff{{{url(", nil},
	} {
		got := cssEmbeds([]byte(c.css), base, nil)
		var want []string
		for _, p := range c.want {
			want = append(want, "http://example.com"+p)
		}
		assert.Equal(t, want, got, fmt.Sprint("css ", c.css))
	}
}

func TestCSSURLsLeaveThePageAsItWas(t *testing.T) {
	page := []byte(`<style>a{b:url(x.png)}</style><p>after</p>`)
	orig := slices.Clone(page)
	base, _ := url.Parse("http://example.com/")
	_, embeds, _, _ := extractLinks(page, base, nil, true)
	assert.Equal(t, []string{"http://example.com/x.png"}, embeds)
	assert.Equal(t, string(orig), string(page))
}

// embedPage names every kind of embed once, with a link and a CDN asset.
const embedPage = `<!doctype html><html><head>
<link rel="stylesheet" href="/s.css"><link rel="icon" href="/favicon.ico">
<link rel="preload" href="/font.woff2" as="font"><link rel="canonical" href="/canon">
<link rel="alternate stylesheet" href="/alt.css">
<style>@import "imp.css"; body{background:url('/bg.png')}</style>
<script src="/app.js"></script><script>var x = "<img src=/not-an-img.png>";</script>
</head><body style="background-image:url(/body.png)">
<img src="/i.png" srcset="/i.png 1x, /i2.png 2x">
<picture><source srcset="/p.webp" type="image/webp"><img src="/p.png"></picture>
<video src="/v.mp4" poster="/poster.jpg"><track src="/t.vtt"></video><audio src="/a.mp3"></audio>
<embed src="/e.swf"><object data="/o.svg"></object>
<div style="x:url(&quot;/div.png&quot;)">d</div>
<img src="http://cdn.example/logo.png">
<!-- <img src="/commented.png"> -->
<a href="/next">next</a><a href="http://cdn.example/page.html">cdn page</a>
</body></html>`

func TestExtractEmbeds(t *testing.T) {
	base, _ := url.Parse("http://example.com/dir/page.html")
	links, embeds, _, _ := extractLinks([]byte(embedPage), base, nil, true)
	var want []string
	for _, p := range []string{"/s.css", "/favicon.ico", "/font.woff2", "/alt.css", "/dir/imp.css", "/bg.png", "/app.js",
		"/body.png", "/i.png", "/i2.png", "/p.webp", "/p.png", "/v.mp4", "/poster.jpg", "/t.vtt", "/a.mp3",
		"/e.swf", "/o.svg", "/div.png"} {
		want = append(want, "http://example.com"+p)
	}
	want = append(want, "http://cdn.example/logo.png")
	slices.Sort(want)
	slices.Sort(embeds)
	assert.Equal(t, want, embeds)
	assert.Equal(t, []string{"http://example.com/canon", "http://example.com/next", "http://cdn.example/page.html"}, links)

	links, embeds, _, _ = extractLinks([]byte(embedPage), base, nil, false)
	assert.Equal(t, 0, len(embeds), embeds)
	assert.Equal(t, 3, len(links), links)

	// nofollow leaves the page's own assets.
	links, embeds, _, nf := extractLinks([]byte(`<meta name=robots content=nofollow><img src=/x.png><a href=/y>`), base, nil, true)
	assert.True(t, nf && len(links) == 0, links)
	assert.Equal(t, []string{"http://example.com/x.png"}, embeds)
}

// TestEmbedsLeaveTheScopeForEmbedHops fetches a page, a stylesheet on the
// CDN and an HTML page on the CDN, at each embed hop count: an embed out
// of scope is kept while its hops are within the limit, a link out of
// scope never is.
func TestEmbedsLeaveTheScopeForEmbedHops(t *testing.T) {
	var srvURL string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cdn.css":
			w.Header().Set("Content-Type", "text/css")
			io.WriteString(w, `@import "more.css"; a{b:url(http://localhost:`+url.PathEscape(r.Host[len("127.0.0.1:"):])+`/font.woff2)}`)
		default:
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, `<img src="http://localhost:`+r.Host[len("127.0.0.1:"):]+`/cdn.png"><a href="http://localhost:`+r.Host[len("127.0.0.1:"):]+`/cdn.html">x</a><img src="/own.png">`)
		}
	}))
	defer srv.Close()
	srvURL = srv.URL
	port := srvURL[len("http://127.0.0.1:"):]
	cdn := "http://localhost:" + port
	cfg := testConfig(srvURL)
	cfg.AllowPrivate = true
	for _, c := range []struct {
		name   string
		hops   *int
		off    bool
		req    Request
		embeds map[string]int // URL -> its Embeds
	}{
		{"page, default hops", nil, false, Request{URL: srvURL + "/"},
			map[string]int{cdn + "/cdn.png": 1, srvURL + "/own.png": 1}},
		{"page, embeds in scope only", new(0), false, Request{URL: srvURL + "/"},
			map[string]int{srvURL + "/own.png": 1}},
		{"page, no embeds", nil, true, Request{URL: srvURL + "/"}, map[string]int{}},
		{"cdn stylesheet at hop 1", nil, false, Request{URL: cdn + "/cdn.css", Embeds: 1},
			map[string]int{cdn + "/more.css": 2, cdn + "/font.woff2": 2}},
		{"cdn stylesheet at hop 2", nil, false, Request{URL: cdn + "/cdn.css", Embeds: 2}, map[string]int{}},
		{"cdn page at hop 1", nil, false, Request{URL: cdn + "/widget.html", Embeds: 1},
			map[string]int{cdn + "/cdn.png": 2, cdn + "/own.png": 2}},
	} {
		cfg := cfg
		cfg.EmbedHops, cfg.NoEmbeds = c.hops, c.off
		f := newTestFetcher(t, cfg)
		c.req.Attempt, c.req.MaxAttempts, c.req.Depth = 1, 3, 1
		res := f.Fetch(testCtx(t), c.req)
		require.True(t, res.Page != nil && res.Err == nil, fmt.Sprint(c.name, ": ", res.Err))
		got := map[string]int{}
		for _, l := range res.Links {
			if l.Embeds > 0 {
				got[l.URL] = l.Embeds
				assert.Equal(t, 1, l.Depth(1), fmt.Sprint(c.name, ": an embed is at its page's depth"))
				continue
			}
			// A link: never out of scope, whatever page it is on.
			assert.Equal(t, srvURL, l.URL[:len(srvURL)], fmt.Sprint(c.name, ": link ", l.URL))
		}
		assert.Equal(t, c.embeds, got, c.name)
	}
}

func TestEmbedRedirectKeepsItsReach(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+r.Host[len("127.0.0.1:"):]+"/moved.png", http.StatusFound)
	}))
	defer srv.Close()
	cfg := testConfig(srv.URL)
	cfg.AllowPrivate = true
	f := newTestFetcher(t, cfg)
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/img.png", Depth: 1, Embeds: 1, Attempt: 1, MaxAttempts: 3})
	require.True(t, res.Page != nil, res.Err)
	assert.Equal(t, []urlrule.Link{{URL: "http://localhost:" + srv.URL[len("http://127.0.0.1:"):] + "/moved.png", Hops: 1, Embeds: 1}}, res.Links)
	// The same redirect of a linked page leaves the scope: dropped.
	res = f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Depth: 1, Attempt: 1, MaxAttempts: 3})
	require.True(t, res.Page != nil, res.Err)
	assert.Equal(t, 0, len(res.Links), res.Links)
}

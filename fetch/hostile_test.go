package fetch

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"math/rand"
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

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/urlrule"
)

// Hostile servers: each fetch ends as a recorded error or a normal page,
// never a panic or a hang.

func hostileServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *Fetcher) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, newTestFetcher(t, testConfig(srv.URL))
}

// cappedServer is hostileServer for a campaign with a 1 MiB body cap.
func cappedServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *Fetcher) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := testConfig(srv.URL)
	cfg.BodyCap = 1 << 20
	return srv, newTestFetcher(t, cfg)
}

func TestHostileMalformedHTML(t *testing.T) {
	// Each document with the links a browser's parser finds in it (paths
	// on the test server): a tag cut by the end of the document is
	// dropped, a stray "<a" is an attribute, script and comments hold no
	// links, the first <base> wins but a javascript: one is ignored, and
	// links with invalid hosts are dropped without losing the others.
	docs := []struct {
		html  string
		links []string
	}{
		{`<html><body><a href="/ok">ok</a><div><p><table><tr><td><a href="/x"`, []string{"/ok"}},
		{`<a href=/unquoted>u</a><a href='/single'>s</a><a href="/unterminated>t</a>`, []string{"/unquoted", "/single"}},
		{`<<<<>>>><a <a href="/nested">n</a></a></b></i></body></html></html>` + strings.Repeat("<div>", 20000), []string{"/nested"}},
		{`<html><head><base href="javascript:evil()"><base href="/second/"></head><a href="x">x</a>`, []string{"/x"}},
		{`<script>document.write('<a href="/in-script">')</script><!-- <a href="/in-comment"> --><a href="/real">r</a>`, []string{"/real"}},
		{`<a href="http://[::1">v6</a><a href="http://%zz/">bad host</a><a href="http://a b/">sp</a><a href="/ok2">ok</a>`, []string{"/ok2"}},
	}
	i := 0
	srv, f := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, docs[i].html)
	})
	for i = range docs {
		res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
		require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
		var want []string
		for _, p := range docs[i].links {
			want = append(want, srv.URL+p)
		}
		assert.Equal(t, want, linkURLs(res.Links), fmt.Sprint("document ", i))
	}
}

// TestHostileDeepNesting: a document nested deeper than the HTML parser
// accepts (512 open elements) still yields its links, the same ones as
// without the nesting, by the tokenizer (linkTags).
func TestHostileDeepNesting(t *testing.T) {
	page, _ := url.Parse("http://example.com/dir/page.html")
	for _, doc := range []string{
		testPage,
		`<script>document.write('<a href="/in-script">')</script><!-- <a href="/in-comment"> --><a href="/real">r</a><style>a[href="/in-style"]{}</style>`,
		`<head><meta name="robots" content="nofollow"></head><a href="/x">x</a>`,
	} {
		want, _, wantNI, wantNF := extractLinks([]byte(doc), page, []string{"utm_source"}, false)
		deep := `<a href="/deep">deep</a>` + strings.Repeat("<div>", 600) + doc
		got, _, ni, nf := extractLinks([]byte(deep), page, []string{"utm_source"}, false)
		if !wantNF {
			want = append([]string{"http://example.com/deep"}, want...)
		}
		assert.True(t, len(want) > 0 || wantNF, "the document has links")
		assert.Equal(t, want, got)
		assert.Equal(t, wantNI, ni)
		assert.Equal(t, wantNF, nf)
	}
}

func TestHostileInvalidUTF8(t *testing.T) {
	body := "<html><body>\xff\xfe\xc3\x28<a href=\"/caf\xe9\">latin-1</a><a href=\"/\xed\xa0\x80/x\">surrogate</a>\x00<a href=\"/after\">after</a></body></html>"
	srv, f := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		io.WriteString(w, body)
	})
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	assert.Equal(t, body, string(res.Page.Body), "stored raw")
	assert.Equal(t, []string{srv.URL + "/caf%E9", srv.URL + "/%ED%A0%80/x", srv.URL + "/after"}, linkURLs(res.Links))
}

// TestHostileHugeBody: a 50 MB body is cut at the campaign's cap, and
// reading stops there (the server could not write most of it).
func TestHostileHugeBody(t *testing.T) {
	const total = 50 << 20
	var written atomic.Int64
	srv, f := cappedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", itoa(total))
		chunk := bytes.Repeat([]byte("<a href=/x>x</a>"), 4096) // 64 KiB
		for written.Load() < total {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	})
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	assert.True(t, res.Page.Truncated)
	assert.Equal(t, f.cfg.BodyCap, int64(len(res.Page.Body)))
	assert.Equal(t, []string{srv.URL + "/x"}, linkURLs(res.Links))
	// The handler stops when the client closes; socket buffers absorb some.
	await.For(t, 10*time.Second, 10*time.Millisecond, "the server to stop writing", func() error {
		w1 := written.Load()
		time.Sleep(50 * time.Millisecond)
		if w2 := written.Load(); w2 != w1 {
			return fmt.Errorf("it wrote %d bytes in 50ms (%d in all)", w2-w1, w2)
		}
		return nil
	})
	assert.True(t, written.Load() < total/2, fmt.Sprint("read did not stop at the cap: ", written.Load()))
}

// TestHostileGzipBomb: 64 MiB of zeros in about 70 KB of gzip; the decoded
// body is capped, the stored body is the compressed one.
func TestHostileGzipBomb(t *testing.T) {
	// A gzip file may hold several members, decoded one after the other:
	// one member of 1 MiB of zeros, repeated, makes the bomb cheaply.
	member := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	var bomb bytes.Buffer
	bomb.Write(member([]byte(`<html><a href="/before">b</a>`)))
	zeros := member(make([]byte, 1<<20))
	for range 64 {
		bomb.Write(zeros)
	}
	bomb.Write(member([]byte(`<a href="/after-the-bomb">a</a></html>`)))
	srv, f := cappedServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bomb.Bytes())
	})
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	assert.True(t, res.Page.Truncated, "decoded cap")
	assert.Equal(t, bomb.Bytes(), res.Page.Body)
	assert.Equal(t, []string{srv.URL + "/before"}, linkURLs(res.Links))

	decoded, truncated, err := decodeBody(bomb.Bytes(), "gzip", 1<<20)
	assert.True(t, err == nil && truncated && len(decoded) == 1<<20, err)
}

// TestHostileRedirectChain follows an endless redirect chain the way the
// frontier would (each target is a new Fetch with the link's Hops) and
// stops at MaxRedirects.
func TestHostileRedirectChain(t *testing.T) {
	var hits atomic.Int32
	srv, f := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		http.Redirect(w, r, "/r/"+itoa(int(n)), http.StatusFound)
	})
	f.cfg.MaxRedirects = new(5)
	req := Request{URL: srv.URL + "/r/0"}
	fetches := 0
	for {
		fetches++
		require.True(t, fetches <= 20, "redirects never stopped")
		res := f.Fetch(testCtx(t), req)
		require.True(t, res.Page != nil && res.Page.Status == http.StatusFound, res.Err)
		if len(res.Links) == 0 {
			assert.True(t, strings.Contains(res.Page.Err, "redirect hop limit"), res.Page.Err)
			break
		}
		req = Request{URL: res.Links[0].URL, Hops: res.Links[0].Hops, Depth: res.Links[0].Depth(req.Depth)}
	}
	assert.Equal(t, 6, fetches, "the seed and 5 hops")
}

// TestHostileSlowServer: one byte per second; the whole-response timeout
// ends the fetch (shortened here from 60 s).
func TestHostileSlowServer(t *testing.T) {
	srv, f := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(200)
		for i := 0; i < 600; i++ {
			if _, err := w.Write([]byte("x")); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(time.Second):
			}
		}
	})
	f.timeouts.Response = time.Second
	start := time.Now()
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/", Attempt: 1, MaxAttempts: 2})
	assert.True(t, res.Retry && res.Err != nil, res)
	res = f.Fetch(testCtx(t), Request{URL: srv.URL + "/", Attempt: 2, MaxAttempts: 2})
	require.True(t, res.Page != nil && !res.Retry, res)
	assert.Equal(t, 0, res.Page.Status)
	assert.True(t, strings.Contains(res.Page.Err, "deadline") || strings.Contains(res.Page.Err, "timeout"), res.Page.Err)
	assert.True(t, time.Since(start) < 20*time.Second, "the timeout did not bound the fetch")
}

// rawServer runs handle on every connection to a loopback listener, after
// reading the request.
func rawServer(t *testing.T, handle func(c *net.TCPConn)) string {
	t.Helper()
	return "http://" + connAddr(t, func(c *net.TCPConn) {
		c.Read(make([]byte, 4096))
		handle(c)
	})
}

func TestHostileConnectionReset(t *testing.T) {
	reset := func(c *net.TCPConn) { c.SetLinger(0) } // close sends RST
	cases := map[string]func(c *net.TCPConn){
		"before response": reset,
		"mid head": func(c *net.TCPConn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Ty")
			reset(c)
		},
		"mid body": func(c *net.TCPConn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\nContent-Type: text/html\r\n\r\n<html>")
			time.Sleep(50 * time.Millisecond)
			reset(c)
		},
		"garbage status": func(c *net.TCPConn) { io.WriteString(c, "SSH-2.0-OpenSSH_9.0\r\n\r\n") },
	}
	for name, h := range cases {
		t.Run(name, func(t *testing.T) {
			u := rawServer(t, h)
			f := newTestFetcher(t, testConfig(u))
			res := f.Fetch(testCtx(t), Request{URL: u + "/", Attempt: 1, MaxAttempts: 3})
			assert.True(t, res.Retry && res.Err != nil && res.Page == nil, res)
			res = f.Fetch(testCtx(t), Request{URL: u + "/", Attempt: 3, MaxAttempts: 3})
			require.True(t, res.Page != nil && !res.Retry, res)
			assert.Equal(t, 0, res.Page.Status)
			assert.True(t, res.Page.Err != "")
		})
	}
}

// TestHostileRobots: 2 MiB of random bytes with one group in them; the
// body is capped at RobotsBodyCap, the lines that cannot be understood are
// skipped, and the group that can is obeyed.
func TestHostileRobots(t *testing.T) {
	garbage := make([]byte, 2<<20)
	rand.New(rand.NewSource(1)).Read(garbage)
	copy(garbage[1000:], "\nuser-agent: *\ndisallow: /secret\ncrawl-delay: 7\n")
	// The same group beyond the cap must not count.
	copy(garbage[urlrule.RobotsBodyCap+1000:], "\nuser-agent: *\ndisallow: /beyond-the-cap\n")
	srv, f := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(garbage)
	})
	rr := f.FetchRobots(testCtx(t), srv.URL)
	require.True(t, rr.Err == nil, rr.Err)
	assert.Equal(t, urlrule.RobotsBodyCap, len(rr.Body), "capped at 500 KiB")
	r := urlrule.ParseRobots(rr.Status, rr.Body, rr.Err)
	assert.True(t, !r.Unreachable)
	assert.True(t, !r.Allowed("/secret"), "the group in the garbage is obeyed")
	assert.True(t, !r.Allowed("/secret/x"))
	assert.True(t, r.Allowed("/x"), "only /secret is disallowed")
	assert.True(t, r.Allowed("/beyond-the-cap"), "a rule past the cap is ignored")
	assert.Equal(t, 7*time.Second, r.CrawlDelay())
	// Random bytes may hold "sitemap:" by chance; whatever they yield is
	// bounded.
	assert.True(t, len(r.Sitemaps()) <= urlrule.MaxSitemaps)
}

func TestHostileLongURL(t *testing.T) {
	long := "/" + strings.Repeat("a", 10000)
	var hits atomic.Int32
	srv, f := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, `<a href="`+long+`">long</a><a href="/short">short</a>`)
	})
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + long, Attempt: 1, MaxAttempts: 3})
	require.True(t, res.Page != nil && !res.Retry)
	assert.True(t, strings.Contains(res.Page.Err, "longer than 2048"), res.Page.Err)
	assert.Equal(t, int32(0), hits.Load())

	res = f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	assert.Equal(t, []string{srv.URL + "/short"}, linkURLs(res.Links))
}

func TestHostileBinaryAsHTML(t *testing.T) {
	bin := make([]byte, 256<<10)
	rand.New(rand.NewSource(2)).Read(bin)
	srv, f := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write(bin)
	})
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	assert.Equal(t, bin, res.Page.Body)
	for _, l := range res.Links {
		assert.True(t, strings.HasPrefix(l.URL, srv.URL+"/"), l.URL)
	}
	// Declared gzip, but not gzip: stored, not parsed, no error.
	srv2, f2 := hostileServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Encoding", "gzip")
		w.Write(bin)
	})
	res = f2.Fetch(testCtx(t), Request{URL: srv2.URL + "/"})
	require.True(t, res.Page != nil && res.Page.Status == 200, res.Err)
	assert.Equal(t, 0, len(res.Links))
}

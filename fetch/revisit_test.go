package fetch

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/page"
)

// conditionalServer answers /page with an ETag and a Last-Modified, 304
// to a request that names either, and /unasked with a 304 whatever the
// request; it remembers the validators each request carried.
type conditionalServer struct {
	*httptest.Server
	mu   sync.Mutex
	body string
	etag string
	got  []http.Header
}

const lastModified = "Thu, 01 Jan 2026 00:00:00 GMT"

func newConditionalServer(t *testing.T) *conditionalServer {
	s := &conditionalServer{body: `<html><body><a href="/a">a</a><img src="/i.png"></body></html>`, etag: `"v1"`}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.got = append(s.got, r.Header.Clone())
		if r.URL.Path == "/unasked" {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", s.etag)
		w.Header().Set("Last-Modified", lastModified)
		if r.Header.Get("If-None-Match") == s.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		io.WriteString(w, s.body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *conditionalServer) last() http.Header {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.got[len(s.got)-1]
}

// A first fetch records the page's capture; a second, with it as Prior,
// is conditional, and the 304 becomes a revisit of the first capture,
// with no body and no links (the scheduler has them).
func TestConditionalFetchRevisitsANotModifiedPage(t *testing.T) {
	srv := newConditionalServer(t)
	f := newTestFetcher(t, testConfig(srv.URL))
	first := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1})
	must(t, first.Capture != nil, "a 200 has a capture")
	c := first.Capture
	equal(t, c.Status, 200)
	equal(t, c.ETag, `"v1"`)
	equal(t, c.LastModified, lastModified)
	equal(t, c.Digest, page.PayloadDigest([]byte(srv.body)))
	equal(t, c.Date, first.Page.FetchedAt)
	check(t, srv.last().Get("If-None-Match") == "" && srv.last().Get("If-Modified-Since") == "", "a first fetch is unconditional")
	equal(t, first.Unchanged, "")

	again := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: c})
	equal(t, srv.last().Get("If-None-Match"), `"v1"`)
	equal(t, srv.last().Get("If-Modified-Since"), lastModified)
	must(t, again.Page != nil && again.Page.Revisit != nil, "a 304 is a revisit")
	equal(t, again.Page.Status, 304)
	equal(t, again.Unchanged, page.RevisitNotModified)
	equal(t, *again.Page.Revisit, page.Revisit{Profile: page.RevisitNotModified, RefersToURI: srv.URL + "/page", RefersToDate: c.Date, Digest: c.Digest})
	equal(t, len(again.Page.Body), 0)
	equal(t, len(again.Links), 0)
	equal(t, again.Reason, "")
	// The history keeps pointing at the first capture.
	equal(t, again.Capture.Date, c.Date)
	equal(t, again.Capture.Digest, c.Digest)
	equal(t, again.Capture.ETag, `"v1"`)
}

// A page sent in full again with the payload digest of its prior capture
// is an identical-payload-digest revisit: its links are extracted, its
// body is not stored again.
func TestConditionalFetchRevisitsAnIdenticalPayload(t *testing.T) {
	srv := newConditionalServer(t)
	f := newTestFetcher(t, testConfig(srv.URL))
	prior := &page.Capture{Status: 200, Digest: page.PayloadDigest([]byte(srv.body)), Date: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: prior})
	check(t, srv.last().Get("If-None-Match") == "" && srv.last().Get("If-Modified-Since") == "", "no validator to send")
	must(t, res.Page != nil && res.Page.Revisit != nil, "the same digest is a revisit")
	equal(t, res.Page.Status, 200)
	equal(t, res.Unchanged, page.RevisitIdenticalDigest)
	equal(t, res.Page.Revisit.RefersToDate, prior.Date)
	equal(t, len(res.Page.Body), 0)
	equal(t, len(res.Links), 2, linkURLs(res.Links))
	equal(t, res.Capture.Date, prior.Date)
	equal(t, res.Capture.ETag, `"v1"`)

	// A changed page is a capture of its own.
	srv.mu.Lock()
	srv.body, srv.etag = srv.body+"<p>changed</p>", `"v2"`
	srv.mu.Unlock()
	res = f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: prior})
	check(t, res.Page.Revisit == nil, "a changed page is no revisit")
	equal(t, res.Unchanged, "")
	equal(t, string(res.Page.Body), srv.body)
	equal(t, res.Capture.Date, res.Page.FetchedAt)
	equal(t, res.Capture.ETag, `"v2"`)
}

// A 304 to a request that carried no validator refers to nothing: it is
// stored as answered, with its reason, and is no revisit.
func TestNotModifiedUnaskedIsAFailure(t *testing.T) {
	srv := newConditionalServer(t)
	f := newTestFetcher(t, testConfig(srv.URL))
	for _, prior := range []*page.Capture{nil, {Status: 200, Digest: "sha1:X"}} {
		res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/unasked", Attempt: 1, MaxAttempts: 1, Prior: prior})
		must(t, res.Page != nil, res.Err)
		equal(t, res.Page.Status, 304)
		check(t, res.Page.Revisit == nil, "no revisit without a validator")
		equal(t, res.Reason, page.ReasonNotModified)
		check(t, res.Page.Err != "", "the page says why")
		check(t, res.Capture == nil, "nothing for the history")
	}
}

// A campaign that keeps no history computes no capture.
func TestNoHistoryNoCapture(t *testing.T) {
	srv := newConditionalServer(t)
	cfg := testConfig(srv.URL)
	cfg.NoHistory = true
	f := newTestFetcher(t, cfg)
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1})
	check(t, res.Capture == nil, "no capture")
	equal(t, string(res.Page.Body), srv.body)
}

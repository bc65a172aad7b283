package fetch

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	require.True(t, first.Capture != nil, "a 200 has a capture")
	c := first.Capture
	assert.Equal(t, 200, c.Status)
	assert.Equal(t, `"v1"`, c.ETag)
	assert.Equal(t, lastModified, c.LastModified)
	assert.Equal(t, page.PayloadDigest([]byte(srv.body)), c.Digest)
	assert.Equal(t, first.Page.FetchedAt, c.Date)
	assert.True(t, srv.last().Get("If-None-Match") == "" && srv.last().Get("If-Modified-Since") == "", "a first fetch is unconditional")
	assert.Equal(t, "", first.Unchanged)

	again := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: c})
	assert.Equal(t, `"v1"`, srv.last().Get("If-None-Match"))
	assert.Equal(t, lastModified, srv.last().Get("If-Modified-Since"))
	require.True(t, again.Page != nil && again.Page.Revisit != nil, "a 304 is a revisit")
	assert.Equal(t, 304, again.Page.Status)
	assert.Equal(t, page.RevisitNotModified, again.Unchanged)
	assert.Equal(t, page.Revisit{Profile: page.RevisitNotModified, RefersToURI: srv.URL + "/page", RefersToDate: c.Date, Digest: c.Digest}, *again.Page.Revisit)
	assert.Equal(t, 0, len(again.Page.Body))
	assert.Equal(t, 0, len(again.Links))
	assert.Equal(t, "", again.Reason)
	// The history keeps pointing at the first capture.
	assert.Equal(t, c.Date, again.Capture.Date)
	assert.Equal(t, c.Digest, again.Capture.Digest)
	assert.Equal(t, `"v1"`, again.Capture.ETag)
}

// A page sent in full again with the payload digest of its prior capture
// is an identical-payload-digest revisit: its links are extracted, its
// body is not stored again.
func TestConditionalFetchRevisitsAnIdenticalPayload(t *testing.T) {
	srv := newConditionalServer(t)
	f := newTestFetcher(t, testConfig(srv.URL))
	prior := &page.Capture{Status: 200, Digest: page.PayloadDigest([]byte(srv.body)), Date: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: prior})
	assert.True(t, srv.last().Get("If-None-Match") == "" && srv.last().Get("If-Modified-Since") == "", "no validator to send")
	require.True(t, res.Page != nil && res.Page.Revisit != nil, "the same digest is a revisit")
	assert.Equal(t, 200, res.Page.Status)
	assert.Equal(t, page.RevisitIdenticalDigest, res.Unchanged)
	assert.Equal(t, prior.Date, res.Page.Revisit.RefersToDate)
	assert.Equal(t, 0, len(res.Page.Body))
	assert.Equal(t, 2, len(res.Links), linkURLs(res.Links))
	assert.Equal(t, prior.Date, res.Capture.Date)
	assert.Equal(t, `"v1"`, res.Capture.ETag)

	// A changed page is a capture of its own.
	srv.mu.Lock()
	srv.body, srv.etag = srv.body+"<p>changed</p>", `"v2"`
	srv.mu.Unlock()
	res = f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: prior})
	assert.True(t, res.Page.Revisit == nil, "a changed page is no revisit")
	assert.Equal(t, "", res.Unchanged)
	assert.Equal(t, srv.body, string(res.Page.Body))
	assert.Equal(t, res.Page.FetchedAt, res.Capture.Date)
	assert.Equal(t, `"v2"`, res.Capture.ETag)
}

// A capture of another URL's identical payload (campaign.Config.Dedup)
// is referred to by that URL: a 200 of the same payload made a revisit by
// SameAs, and, later, a 304 or an identical payload to a request with the
// history that capture left, refer to the other URL's record and date.
func TestRevisitOfAnotherURLsCapture(t *testing.T) {
	srv := newConditionalServer(t)
	f := newTestFetcher(t, testConfig(srv.URL))
	other := page.Capture{Status: 200, Digest: page.PayloadDigest([]byte(srv.body)), Date: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), URI: srv.URL + "/first"}
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1})
	require.True(t, Dedupable(res), "a 200 stored whole can be deduplicated")
	SameAs(&res, other)
	assert.Equal(t, page.Revisit{Profile: page.RevisitIdenticalDigest, RefersToURI: other.URI, RefersToDate: other.Date, Digest: other.Digest}, *res.Page.Revisit)
	assert.Equal(t, page.RevisitIdenticalDigest, res.Unchanged)
	assert.Equal(t, 0, len(res.Page.Body))
	assert.Equal(t, 2, len(res.Links), "its links are the page's")
	assert.False(t, Dedupable(res), "a revisit is deduplicated already")
	// Its history keeps its own validators, and the other URL's capture.
	hist := res.Capture
	assert.Equal(t, `"v1"`, hist.ETag)
	assert.Equal(t, other.URI, hist.URI)
	assert.Equal(t, other.Date, hist.Date)

	again := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: hist})
	require.True(t, again.Page.Revisit != nil, "a 304 is a revisit")
	assert.Equal(t, page.Revisit{Profile: page.RevisitNotModified, RefersToURI: other.URI, RefersToDate: other.Date, Digest: other.Digest}, *again.Page.Revisit)
	assert.Equal(t, other.URI, again.Capture.URI)

	unconditional := *hist
	unconditional.ETag, unconditional.LastModified = "", ""
	same := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1, Prior: &unconditional})
	require.True(t, same.Page.Revisit != nil, "the same digest is a revisit")
	assert.Equal(t, other.URI, same.Page.Revisit.RefersToURI)
	assert.Equal(t, other.URI, same.Capture.URI)
}

// A 304 to a request that carried no validator refers to nothing: it is
// stored as answered, with its reason, and is no revisit.
func TestNotModifiedUnaskedIsAFailure(t *testing.T) {
	srv := newConditionalServer(t)
	f := newTestFetcher(t, testConfig(srv.URL))
	for _, prior := range []*page.Capture{nil, {Status: 200, Digest: "sha1:X"}} {
		res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/unasked", Attempt: 1, MaxAttempts: 1, Prior: prior})
		require.True(t, res.Page != nil, res.Err)
		assert.Equal(t, 304, res.Page.Status)
		assert.True(t, res.Page.Revisit == nil, "no revisit without a validator")
		assert.Equal(t, page.ReasonNotModified, res.Reason)
		assert.True(t, res.Page.Err != "", "the page says why")
		assert.True(t, res.Capture == nil, "nothing for the history")
	}
}

// A campaign that keeps no history computes no capture.
func TestNoHistoryNoCapture(t *testing.T) {
	srv := newConditionalServer(t)
	cfg := testConfig(srv.URL)
	cfg.NoHistory = true
	f := newTestFetcher(t, cfg)
	res := f.Fetch(testCtx(t), Request{URL: srv.URL + "/page", Attempt: 1, MaxAttempts: 1})
	assert.True(t, res.Capture == nil, "no capture")
	assert.Equal(t, srv.body, string(res.Page.Body))
}

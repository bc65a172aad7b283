package activities

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
)

// Every lease the runner fetches leaves one crawl log line, written before
// its outcome is reported, saying what became of it; a page whose line
// cannot be written is not reported stored.
func TestRunnerLogsEachAttempt(t *testing.T) {
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		switch r.URL.Path {
		case "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nDisallow: /private/\n")
		case "/busy":
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprint(w, `<html><body><a href="/next">next</a></body></html>`)
		}
	}))
	defer srv.Close()
	cfg := campaign.Config{ID: "log", Seeds: []string{srv.URL + "/"}, AllowPrivate: true, Sinks: []string{"warc:/unused"}}.WithDefaults()
	require.NoError(t, cfg.Validate())
	f, err := fetch.New(cfg)
	require.NoError(t, err)
	defer f.Close()
	root := t.TempDir()
	w, err := crawllog.Create(root, "log", "test")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	run := func(sk sink.Sink, l session.Lease) session.Outcome {
		r := NewRunner(cfg, f, sk, 0, "test")
		r.storeRetryFor, r.log = testRetryFor, &crawlLog{file: w}
		return r.handle(ctx, l)
	}
	mem := sink.NewMemory()
	run(mem, session.Lease{ID: 1, Kind: session.KindRobots, URL: srv.URL})
	run(mem, session.Lease{ID: 2, URL: srv.URL + "/", Attempt: 1, MaxAttempts: 3})
	run(mem, session.Lease{ID: 3, URL: srv.URL + "/a", Parent: srv.URL + "/", Path: "L", Attempt: 1, MaxAttempts: 3})
	o := run(mem, session.Lease{ID: 4, URL: srv.URL + "/busy", Parent: srv.URL + "/", Path: "L", Attempt: 1, MaxAttempts: 3})
	require.True(t, o.Retry)
	o = run(&failingSink{err: sink.ErrRejected, fails: -1}, session.Lease{ID: 5, URL: srv.URL + "/b", Parent: srv.URL + "/", Path: "L", Attempt: 1, MaxAttempts: 3})
	require.True(t, o.SinkRefused)
	require.NoError(t, w.Close())
	o = run(mem, session.Lease{ID: 6, URL: srv.URL + "/c", Parent: srv.URL + "/", Path: "L", Attempt: 1, MaxAttempts: 3})
	require.True(t, o.SinkFailed, "a page whose line is not written: %+v", o)
	require.False(t, o.Stored)
	require.Contains(t, o.Error, "crawl log")

	var lines []crawllog.Line
	_, bad, err := crawllog.ReadDir(crawllog.Dir(root, "log"), func(l crawllog.Line) { lines = append(lines, l) })
	require.NoError(t, err)
	require.Zero(t, bad)
	require.Len(t, lines, int(requests.Load())-1, "a line per request but the last's, whose line could not be written")
	want := []struct {
		outcome, url, path string
		status             int
		annotations        []string
	}{
		{crawllog.OutcomeRobots, srv.URL + "/robots.txt", "P", 200, nil},
		{crawllog.OutcomePage, srv.URL + "/", "", 200, nil},
		{crawllog.OutcomePage, srv.URL + "/a", "L", 200, nil},
		{crawllog.OutcomeRetry, srv.URL + "/busy", "L", 503, nil},
		{crawllog.OutcomeUnstored, srv.URL + "/b", "L", 200, []string{crawllog.AnnotDeadLettered}},
	}
	for i, l := range lines {
		wl := want[i]
		require.Equal(t, wl.outcome, l.Outcome, "line %d: %+v", i, l)
		require.Equal(t, wl.url, l.URL)
		require.Equal(t, wl.path, l.Path)
		require.Equal(t, wl.status, l.Status)
		require.Equal(t, wl.annotations, l.Annotations)
		require.Equal(t, "test", l.Worker)
	}
	stored := mem.Pages()
	require.Len(t, stored, 3, "/, /a and /c (stored, then its line failed)")
	require.Equal(t, page.PayloadDigest(stored[1].Body), lines[2].Digest)
	require.Equal(t, int64(len(stored[1].Body)), lines[2].Size)
	require.Equal(t, "text/html; charset=utf-8", lines[2].MIME)
	require.Equal(t, srv.URL+"/", lines[2].Via)
}

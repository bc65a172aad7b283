package seedfile_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/seedfile"
	"github.com/drover-crawl/drover/urlrule"
)

// queue is a fake scheduler: it queues each URL once, as the seen store's
// marks do, and counts the batches it was sent.
type queue struct {
	queued  map[string]int
	batches int
	fail    int // the next fail sends fail
}

func (q *queue) send(_ context.Context, urls []string) (int, error) {
	q.batches++
	if q.fail > 0 {
		q.fail--
		return 0, errors.New("scheduler away")
	}
	n := 0
	for _, u := range urls {
		if q.queued[u] == 0 {
			n++
		}
		q.queued[u]++
	}
	return n, nil
}

func TestStreamCountsEveryLine(t *testing.T) {
	list := strings.Join([]string{
		"# a comment",
		"http://a.example/1",
		"",
		"http://a.example/1", // twice in one batch
		"ftp://a.example/x",  // not http(s)
		"http://b.example/2",
		"http://c.example/3", // out of scope below
		"http://a.example/4",
	}, "\n")
	scope, err := urlrule.NewScope(campaign.Config{Seeds: []string{"http://a.example/", "http://b.example/"}})
	require.NoError(t, err)
	q := &queue{queued: map[string]int{}}
	c, err := seedfile.Stream(context.Background(), strings.NewReader(list), seedfile.Options{Batch: 2, Scope: scope}, q.send)
	require.NoError(t, err)
	require.Equal(t, int64(8), c.Lines)
	require.Equal(t, int64(2), c.Blank)
	require.Equal(t, int64(3), c.Seeded)
	require.Equal(t, int64(1), c.Known)
	require.Equal(t, int64(1), c.Invalid)
	require.Equal(t, int64(1), c.Refused)
	require.Equal(t, c.Lines, c.Blank+c.Seeded+c.Known+c.Invalid+c.Refused, "every line counted once")
	require.Len(t, c.Examples, 2)
	require.Contains(t, c.Examples[1], "line 7: http://c.example/3: out of scope")
	for u, n := range q.queued {
		require.Equal(t, 1, n, "%s sent %d times", u, n)
	}
}

// A stream resumed from an attempt's last progress sends nothing again,
// and its counts add up as one stream's.
func TestStreamResumesFromProgress(t *testing.T) {
	var b strings.Builder
	for i := range 10 {
		fmt.Fprintf(&b, "http://a.example/%d\n", i)
	}
	q := &queue{queued: map[string]int{}}
	var last seedfile.Counts
	stop := errors.New("worker killed")
	_, err := seedfile.Stream(context.Background(), strings.NewReader(b.String()), seedfile.Options{Batch: 3, Backoff: time.Millisecond, Progress: func(c seedfile.Counts) {
		last = c
	}}, func(ctx context.Context, urls []string) (int, error) {
		if q.batches == 2 {
			return 0, stop
		}
		return q.send(ctx, urls)
	})
	require.ErrorIs(t, err, stop)
	require.Equal(t, int64(6), last.Lines)
	c, err := seedfile.Stream(context.Background(), strings.NewReader(b.String()), seedfile.Options{Batch: 3, From: last}, q.send)
	require.NoError(t, err)
	require.Equal(t, int64(10), c.Lines)
	require.Equal(t, int64(10), c.Seeded)
	require.Len(t, q.queued, 10)
	for u, n := range q.queued {
		require.Equal(t, 1, n, "%s sent %d times", u, n)
	}
}

func TestStreamTriesABatchThreeTimes(t *testing.T) {
	q := &queue{queued: map[string]int{}, fail: 2}
	c, err := seedfile.Stream(context.Background(), strings.NewReader("http://a.example/\n"), seedfile.Options{Backoff: time.Millisecond}, q.send)
	require.NoError(t, err)
	require.Equal(t, int64(1), c.Seeded)
	require.Equal(t, 3, q.batches)

	q = &queue{queued: map[string]int{}, fail: 3}
	_, err = seedfile.Stream(context.Background(), strings.NewReader("http://a.example/\n"), seedfile.Options{Backoff: time.Millisecond}, q.send)
	require.ErrorContains(t, err, "scheduler away")
	require.Equal(t, 3, q.batches, "tries bounded")
}

func TestStreamBoundsHosts(t *testing.T) {
	list := "http://a.example/\nhttp://b.example/\nhttp://c.example/\n"
	hosts := map[string]bool{}
	q := &queue{queued: map[string]int{}}
	_, err := seedfile.Stream(context.Background(), strings.NewReader(list), seedfile.Options{Hosts: hosts, MaxHosts: 2}, q.send)
	require.ErrorIs(t, err, seedfile.ErrTooManyHosts)
	require.Empty(t, q.queued, "nothing sent past the bound")
}

func TestOpenReadsGzipPlainAndURLs(t *testing.T) {
	const list = "http://a.example/1\nhttp://a.example/2\n"
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(list))
	require.NoError(t, zw.Close())
	dir := t.TempDir()
	plain, packed := filepath.Join(dir, "seeds.txt"), filepath.Join(dir, "seeds.bin") // the name does not say gzip
	require.NoError(t, os.WriteFile(plain, []byte(list), 0o644))
	require.NoError(t, os.WriteFile(packed, gz.Bytes(), 0o644))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/seeds.gz" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(gz.Bytes())
	}))
	defer srv.Close()
	for _, src := range []string{plain, packed, srv.URL + "/seeds.gz", "-"} {
		rc, err := seedfile.Open(context.Background(), src, strings.NewReader(list))
		require.NoError(t, err, src)
		got, err := io.ReadAll(rc)
		require.NoError(t, err)
		require.NoError(t, rc.Close())
		require.Equal(t, list, string(got), src)
	}
	_, err := seedfile.Open(context.Background(), srv.URL+"/missing", nil)
	require.ErrorContains(t, err, "404")
	_, err = seedfile.Open(context.Background(), filepath.Join(dir, "none"), nil)
	require.ErrorContains(t, err, "no such file")
}

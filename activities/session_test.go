package activities

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
)

// failingSink fails its first fails Stores (all of them when fails < 0)
// with err, then stores.
type failingSink struct {
	err   error
	fails int32
	calls atomic.Int32
}

func (s *failingSink) Store(ctx context.Context, p *page.Page) error {
	n := s.calls.Add(1)
	if s.fails < 0 || n <= s.fails {
		return fmt.Errorf("test sink: store %s: %w", p.URL, s.err)
	}
	return nil
}

func (s *failingSink) Close() error { return nil }

// testRetryFor stands in for storeRetryFor (2 min): with the backoff
// (250 ms, doubling) a store is tried at 0, 0.25, 0.75 and 1.75 s, and
// the next try, at 3.75 s, would be past it. The third try, which the
// recovering sink takes, has 2 s of room on a slow machine.
const testRetryFor = 3 * time.Second

// The fetched page's store is retried while the sink fails, and after the
// store retry limit the outcome says SinkFailed (the scheduler puts the URL
// aside), never Stored, with the page's links; a permanent refusal is not
// retried and says SinkRefused; a sink that recovers within the limit
// stores the page.
func TestRunnerSinkFailedAfterRetryLimit(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><body><a href="/next">next</a></body></html>`)
	}))
	defer srv.Close()
	cfg := campaign.Config{ID: "sinkfail", Seeds: []string{srv.URL + "/"}, AllowPrivate: true, Sinks: []string{"warc:/unused"}}.WithDefaults()
	require.NoError(t, cfg.Validate())
	down := errors.New("sink down")
	cases := []struct {
		name string
		sk   *failingSink
		// calls: the stores tried, at least (the retries of a sink that
		// stays down depend on the clock) or exactly (when exact).
		calls int32
		exact bool
		// stored: the outcome says Stored; otherwise SinkFailed.
		stored bool
	}{
		{"always failing", &failingSink{err: down, fails: -1}, 2, false, false},
		{"refused for good", &failingSink{err: sink.ErrRejected, fails: -1}, 1, true, false},
		{"back within the limit", &failingSink{err: down, fails: 2}, 3, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := fetch.New(cfg)
			require.NoError(t, err)
			defer f.Close()
			r := NewRunner(cfg, f, tc.sk, 0, "test")
			r.storeRetryFor = testRetryFor
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			o := r.handle(ctx, session.Lease{ID: 7, URL: srv.URL + "/", MaxAttempts: 3})

			require.Equal(t, uint64(7), o.LeaseID)
			if tc.exact {
				require.Equal(t, tc.calls, tc.sk.calls.Load(), "stores tried")
			} else {
				require.GreaterOrEqual(t, tc.sk.calls.Load(), tc.calls, "stores tried")
			}
			c := r.Counters()
			if tc.stored {
				require.True(t, o.Stored, "outcome %+v: want Stored", o)
				require.False(t, o.SinkFailed, "outcome %+v", o)
				require.Equal(t, 200, o.Status)
				require.Len(t, o.Links, 1, "the page's links are reported with it")
				require.Equal(t, int64(1), c.Fetched)
				return
			}
			require.True(t, o.SinkFailed, "outcome %+v: want SinkFailed", o)
			require.Equal(t, sink.Permanent(tc.sk.err), o.SinkRefused, "outcome %+v: refused for good only when the sink said so", o)
			require.Len(t, o.Links, 1, "the page's links go with it, for when it is dead-lettered")
			require.False(t, o.Stored, "a page no sink took is reported stored: %+v", o)
			require.True(t, strings.Contains(o.Error, tc.sk.err.Error()), "outcome error %q does not say why", o.Error)
			require.Equal(t, int64(0), c.Fetched)
			require.Equal(t, int64(1), c.Errors)
		})
	}
}

// SessionsRunning hears every count, in order, from sessions of two
// campaigns that start and end at once: each count of sessions it hears
// is one off the one before, the campaigns never more than 2 nor more
// than the sessions, and the last is none of either. Told out of order,
// a worker's memory limit would stay at the count of sessions that ended.
func TestSessionsRunningHearsEachCountInOrder(t *testing.T) {
	type count struct{ sessions, campaigns int }
	var heard []count
	a := &Activities{SessionsRunning: func(s, c int) { heard = append(heard, count{s, c}) }}
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			c := []string{"c-1", "c-2"}[i%2]
			a.sessionRunning(c, 1)
			a.sessionRunning(c, -1)
		})
	}
	wg.Wait()
	require.Len(t, heard, 128)
	require.Equal(t, count{1, 1}, heard[0])
	for i := 1; i < len(heard); i++ {
		prev, n := heard[i-1], heard[i]
		require.Contains(t, []int{prev.sessions - 1, prev.sessions + 1}, n.sessions, "%d sessions heard after %d", n.sessions, prev.sessions)
		require.LessOrEqual(t, n.campaigns, min(2, n.sessions), "campaigns heard with %d sessions", n.sessions)
		require.Equal(t, n.sessions > 0, n.campaigns > 0, "%d campaigns with %d sessions", n.campaigns, n.sessions)
	}
	require.Equal(t, count{0, 0}, heard[len(heard)-1])
}

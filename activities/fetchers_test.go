package activities

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/sink"
)

func TestFetcherPoolSharesPerCampaign(t *testing.T) {
	fetchers := newPool[*fetch.Fetcher]()
	acquire := func(cfg campaign.Config) (*fetch.Fetcher, func(), error) {
		return fetchers.acquire(context.Background(), cfg.ID, cfg, func() (*fetch.Fetcher, func(), error) {
			f, err := fetch.New(cfg)
			if err != nil {
				return nil, nil, err
			}
			return f, f.Close, nil
		})
	}
	cfg := campaign.Config{ID: "c1", Seeds: []string{"http://127.0.0.1/"}, Fetchers: 2}.WithDefaults()
	f1, rel1, err := acquire(cfg)
	require.NoError(t, err)
	f2, rel2, err := acquire(cfg)
	require.NoError(t, err)
	require.Same(t, f1, f2, "two sessions of one campaign got two Fetchers: each holds its own connections")
	other := cfg
	other.ID = "c2"
	f3, rel3, err := acquire(other)
	require.NoError(t, err)
	require.NotSame(t, f1, f3, "two campaigns share a Fetcher")
	changed := cfg
	changed.AllowPrivate = !cfg.AllowPrivate
	f4, rel4, err := acquire(changed)
	require.NoError(t, err)
	require.NotSame(t, f1, f4, "a session with other settings got the campaign's shared Fetcher")
	rel4()
	rel1()
	require.Len(t, fetchers.m, 2, "pooled after one of two releases")
	rel2()
	rel3()
	require.Empty(t, fetchers.m, "pooled after every release")
	f5, rel5, err := acquire(cfg)
	require.NoError(t, err)
	defer rel5()
	require.NotSame(t, f1, f5, "a Fetcher closed with its last session was handed out again")
}

// TestSinksSharedAndClosedByTheLastSession: the sessions of a campaign in
// one process store through one sink, closed once, by the last to leave.
func TestSinksSharedAndClosedByTheLastSession(t *testing.T) {
	sinks := newPool[sink.Sink]()
	var opened, closed atomic.Int32
	open := func() (sink.Sink, func(), error) {
		opened.Add(1)
		return sink.NewMemory(), func() { closed.Add(1) }, nil
	}
	ctx := context.Background()
	s1, rel1, err := sinks.acquire(ctx, "c1", []string{"kafka:///pages"}, open)
	require.NoError(t, err)
	s2, rel2, err := sinks.acquire(ctx, "c1", []string{"kafka:///pages"}, open)
	require.NoError(t, err)
	require.Same(t, s1, s2, "two sessions of one campaign opened two sinks: each batches only its own pages")
	s3, rel3, err := sinks.acquire(ctx, "c1", []string{"warc:/tmp/x"}, open)
	require.NoError(t, err)
	require.NotSame(t, s1, s3, "a session with other sinks got the campaign's shared sink")
	rel3()
	require.EqualValues(t, 1, closed.Load(), "a session's own sink was not closed when it left")
	rel1()
	require.EqualValues(t, 1, closed.Load(), "the shared sink was closed while a session still stores through it")
	rel2()
	require.EqualValues(t, 2, closed.Load(), "the shared sink was not closed by the last session")
	require.EqualValues(t, 2, opened.Load())
	require.Empty(t, sinks.m)
}

// TestSinkOpenFailureIsSharedNotKept: sessions that ask while the first
// one opens the sink wait for it; when it fails they all get its error,
// and the next session tries again instead of getting the failure.
func TestSinkOpenFailureIsSharedNotKept(t *testing.T) {
	sinks := newPool[sink.Sink]()
	down := errors.New("kafka 127.0.0.1:1: unreachable")
	gate, entered := make(chan struct{}), make(chan struct{})
	var opened atomic.Int32
	failing := func() (sink.Sink, func(), error) {
		if opened.Add(1) == 1 {
			close(entered)
		}
		<-gate
		return nil, nil, down
	}
	ctx := context.Background()
	errs := make(chan error, 2)
	acquire := func() {
		_, _, err := sinks.acquire(ctx, "c1", "kafka", failing)
		errs <- err
	}
	go acquire()
	<-entered // the first session is inside open
	// A session that comes meanwhile waits on that open, within its context.
	waitCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, _, err := sinks.acquire(waitCtx, "c1", "kafka", failing)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "a session waiting on the sink's open ignored its context")
	go acquire()
	await.For(t, 5*time.Second, time.Millisecond, "a second session waiting on the open", func() error {
		sinks.mu.Lock()
		defer sinks.mu.Unlock()
		if e := sinks.m["c1"]; e == nil || e.refs < 2 {
			return errors.New("not waiting yet")
		}
		return nil
	})
	close(gate)
	for range 2 {
		require.ErrorIs(t, <-errs, down)
	}
	require.EqualValues(t, 1, opened.Load(), "sessions that came while the sink was opening opened it again")
	require.Empty(t, sinks.m, "a sink that failed to open is still pooled")

	var closed atomic.Int32
	s, rel, err := sinks.acquire(ctx, "c1", "kafka", func() (sink.Sink, func(), error) {
		return sink.NewMemory(), func() { closed.Add(1) }, nil
	})
	require.NoError(t, err, "the next session got the earlier failure instead of opening again")
	require.NotNil(t, s)
	rel()
	require.EqualValues(t, 1, closed.Load())
}

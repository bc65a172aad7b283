package activities

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/sink"
)

func TestFetcherPoolSharesPerCampaign(t *testing.T) {
	fetchers := newPool[*fetch.Fetcher]()
	acquire := func(cfg campaign.Config) (*fetch.Fetcher, func() error, error) {
		return fetchers.acquire(context.Background(), cfg.ID, cfg, func() (*fetch.Fetcher, func() error, error) {
			f, err := fetch.New(cfg)
			if err != nil {
				return nil, nil, err
			}
			return f, func() error { f.Close(); return nil }, nil
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

// Sessions of one campaign whose configs differ only in their live rules
// (started before and after an include) share its Fetcher, whose scope
// holds the newest include whatever order they come in.
func TestFetcherSharedAcrossLiveRules(t *testing.T) {
	cfg := campaign.Config{ID: fmt.Sprintf("live-%d", time.Now().UnixNano()), Seeds: []string{"http://127.0.0.1/"}, Fetchers: 2}.WithDefaults()
	newer := cfg
	newer.Live = campaign.Rules{}.WithInclude(`^http://127\.0\.0\.2/`)
	inScope := func(f *fetch.Fetcher, raw string) bool {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		ok, _ := f.Scope().Allow(u, 1, nil)
		return ok
	}
	f1, rel1, err := acquireFetcher(context.Background(), cfg, nil)
	require.NoError(t, err)
	defer rel1()
	require.False(t, inScope(f1, "http://127.0.0.2/a"))
	f2, rel2, err := acquireFetcher(context.Background(), newer, nil)
	require.NoError(t, err)
	defer rel2()
	require.Same(t, f1, f2, "a session started after an include got a Fetcher of its own")
	require.True(t, inScope(f1, "http://127.0.0.2/a"), "the shared scope took the newer session's include")
	f3, rel3, err := acquireFetcher(context.Background(), cfg, nil)
	require.NoError(t, err)
	defer rel3()
	require.Same(t, f1, f3)
	require.True(t, inScope(f1, "http://127.0.0.2/a"), "an older session's rules undid the include")
}

// TestSinksSharedAndClosedByTheLastSession: the sessions of a campaign in
// one process store through one sink, closed once, by the last to leave.
func TestSinksSharedAndClosedByTheLastSession(t *testing.T) {
	sinks := newPool[sink.Sink]()
	var opened, closed atomic.Int32
	open := func() (sink.Sink, func() error, error) {
		opened.Add(1)
		return sink.NewMemory(), func() error { closed.Add(1); return nil }, nil
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
	failing := func() (sink.Sink, func() error, error) {
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
	s, rel, err := sinks.acquire(ctx, "c1", "kafka", func() (sink.Sink, func() error, error) {
		return sink.NewMemory(), func() error { closed.Add(1); return nil }, nil
	})
	require.NoError(t, err, "the next session got the earlier failure instead of opening again")
	require.NotNil(t, s)
	rel()
	require.EqualValues(t, 1, closed.Load())
}

// TestCampaignSinksSharedThroughAcquireSinks: two sessions of a campaign,
// as FetchSession opens them (the machine's PostgreSQL and a WARC
// directory, the worker's options), get one sink; the opener's cancelled
// context does not fail the open (another session may be waiting on it:
// pgx's connect would fail on it), and the sink stays open until the last
// session gives it back.
func TestCampaignSinksSharedThroughAcquireSinks(t *testing.T) {
	testenv.NeedsPostgres(t)
	table := fmt.Sprintf("drover_test_shared_sinks_%d", time.Now().UnixNano())
	pg := "postgres://postgres@127.0.0.1:5432/test?sslmode=disable&table=" + table
	t.Cleanup(func() { dropTable(t, table) })
	cfg := campaign.Config{ID: "shared-sinks", Seeds: []string{"http://127.0.0.1/"}, Sinks: []string{pg, "warc:" + t.TempDir()}}.WithDefaults()
	opts := sink.Options{Campaign: cfg.ID, BodyCap: cfg.BodyCap, KafkaBrokers: "127.0.0.1:1"}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	s1, rel1, err := acquireSinks(cancelled, cfg, opts)
	require.NoError(t, err, "the opening session's cancel failed the shared open")
	s2, rel2, err := acquireSinks(context.Background(), cfg, opts)
	require.NoError(t, err)
	// Two sinks make a sink.Multi, a slice: the same one has the same array.
	require.Equal(t, fmt.Sprintf("%p", s1), fmt.Sprintf("%p", s2), "two sessions of one campaign opened two sinks through acquireSinks")
	// A session that comes with its ctx done gets the sink made already.
	s3, rel3, err := acquireSinks(cancelled, cfg, opts)
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%p", s1), fmt.Sprintf("%p", s3))
	require.NoError(t, rel3())
	require.NoError(t, rel1())
	p := &page.Page{URL: "http://127.0.0.1/a", Status: 200, Body: []byte("<html></html>"), FetchedAt: time.Now()}
	require.NoError(t, s2.Store(context.Background(), p), "the sink was closed while a session still stores through it")
	require.NoError(t, rel2())
	require.ErrorIs(t, s2.Store(context.Background(), p), sink.ErrClosed, "the last session's release left the sink open")
}

func dropTable(t *testing.T, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	if err != nil {
		t.Logf("dropping %s: %v", table, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP TABLE IF EXISTS "+pgx.Identifier{table}.Sanitize()); err != nil {
		t.Logf("dropping %s: %v", table, err)
	}
}

// TestSinkOpenPanicFreesItsWaiters: an open that panics still lets the
// sessions waiting on it go (with an error), and leaves nothing pooled.
func TestSinkOpenPanicFreesItsWaiters(t *testing.T) {
	sinks := newPool[sink.Sink]()
	entered, gate := make(chan struct{}), make(chan struct{})
	waited := make(chan error, 1)
	go func() {
		<-entered
		_, _, err := sinks.acquire(context.Background(), "c1", "kafka", nil)
		waited <- err
	}()
	go func() { // the gate opens once a second session waits on the open
		err := await.Until(context.Background(), 5*time.Second, time.Millisecond, func() error {
			sinks.mu.Lock()
			defer sinks.mu.Unlock()
			if e := sinks.m["c1"]; e == nil || e.refs < 2 {
				return errors.New("no second session waiting on the open")
			}
			return nil
		})
		assert.NoError(t, err)
		close(gate)
	}()
	require.Panics(t, func() {
		_, _, _ = sinks.acquire(context.Background(), "c1", "kafka", func() (sink.Sink, func() error, error) {
			close(entered)
			<-gate
			panic("driver bug")
		})
	})
	require.ErrorIs(t, <-waited, errOpenPanicked)
	require.Empty(t, sinks.m, "a sink whose open panicked is still pooled: every later session would wait on it")
}

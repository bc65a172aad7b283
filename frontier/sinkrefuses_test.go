package frontier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refusingSink stores every page but one, which it refuses for good, as a
// Kafka broker refuses a record over its limit.
type refusingSink struct {
	*sink.Memory
	refuse string
}

func (s refusingSink) Store(ctx context.Context, p *page.Page) error {
	if p.URL == s.refuse {
		return fmt.Errorf("kafka test: store %s: %w", p.URL, sink.ErrRecordTooLarge)
	}
	return s.Memory.Store(ctx, p)
}

// A page that a sink refuses for good is not fetched again, nor parked:
// no retry can store it. It is dead-lettered at once with reason sink,
// listed among the failures and left in the dead-letter queue (to be
// replayed once the sink takes it), and its links are followed: the
// pages reachable only through it are crawled (it is the first host's
// root here), every other page is stored. The scheduler's crawl log has
// its dead-letter line.
func TestPageRefusedBySinkIsDeadLettered(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 20, CrossHost: true, Base: 67})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	cfg.CrawlLog = t.TempDir()
	seed(t, sched, cfg)
	refused := web.Seeds()[0]
	sk := refusingSink{Memory: sink.NewMemory(), refuse: refused}
	startFleet(t, cfg, []string{sched.addr}, sk, 2)
	st := waitDrained(t, []string{sched.addr}, cfg.ID, 2*time.Minute)
	assert.Equal(t, int64(1), st.DeadLettered, "%d dead-lettered (%d in the queue), failed by reason %v; want the refused page, reason sink", st.DeadLettered, st.DeadQueued, st.FailedBy)
	assert.Equal(t, int64(1), st.FailedBy[frontier.ReasonSink], "%d dead-lettered (%d in the queue), failed by reason %v; want the refused page, reason sink", st.DeadLettered, st.DeadQueued, st.FailedBy)
	assert.Equal(t, int64(1), st.DeadQueued, "%d dead-lettered (%d in the queue), failed by reason %v; want the refused page, reason sink", st.DeadLettered, st.DeadQueued, st.FailedBy)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, _, err := session.Client{Token: session.DevToken}.Failures(ctx, []string{sched.addr}, cfg.ID, frontier.ReasonSink)
	require.NoError(t, err, "failures with reason sink: %+v", fs)
	require.Len(t, fs, 1, "failures with reason sink")
	require.Equal(t, refused, fs[0].URL, "failures with reason sink: %+v", fs)
	assert.Equal(t, 1, web.Count(refused), "times the refused page was fetched")
	missing := web.Missing()
	assert.Zero(t, len(missing), "pages never fetched (the refused page's links not followed?), e.g. %v", missing[:min(1, len(missing))])
	stored := map[string]bool{}
	for _, p := range sk.Pages() {
		stored[p.URL] = true
	}
	for _, u := range web.Pages() {
		if u != refused {
			assert.True(t, stored[u], "page %s not stored", u)
		}
	}
	assert.False(t, stored[refused], "the refused page was stored")
	t.Logf("refused page: %d fetches, %s", web.Count(refused), fs[0].LastError)

	var dead []crawllog.Line
	_, _, err = crawllog.ReadDir(crawllog.Dir(cfg.CrawlLog, cfg.FrontierKey()), func(l crawllog.Line) {
		if l.Outcome == crawllog.OutcomeDeadLettered {
			dead = append(dead, l)
		}
	})
	require.NoError(t, err)
	if assert.Len(t, dead, 1, "crawl log dead-letter lines %+v, want one of %s with reason sink and the seed's empty path", dead, refused) {
		assert.Equal(t, refused, dead[0].URL, "crawl log dead-letter lines %+v, want one of %s with reason sink and the seed's empty path", dead, refused)
		assert.Equal(t, frontier.ReasonSink, dead[0].Reason, "crawl log dead-letter lines %+v, want one of %s with reason sink and the seed's empty path", dead, refused)
		assert.Empty(t, dead[0].Path, "crawl log dead-letter lines %+v, want one of %s with reason sink and the seed's empty path", dead, refused)
	}
}

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
	if st.DeadLettered != 1 || st.FailedBy[frontier.ReasonSink] != 1 || st.DeadQueued != 1 {
		t.Errorf("%d dead-lettered (%d in the queue), failed by reason %v; want the refused page, reason sink", st.DeadLettered, st.DeadQueued, st.FailedBy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, _, err := session.Client{Token: session.DevToken}.Failures(ctx, []string{sched.addr}, cfg.ID, frontier.ReasonSink)
	if err != nil || len(fs) != 1 || fs[0].URL != refused {
		t.Fatalf("failures with reason sink: %+v %v", fs, err)
	}
	if n := web.Count(refused); n != 1 {
		t.Errorf("the refused page was fetched %d times, want once", n)
	}
	if missing := web.Missing(); len(missing) != 0 {
		t.Errorf("%d pages never fetched (the refused page's links not followed?), e.g. %s", len(missing), missing[0])
	}
	stored := map[string]bool{}
	for _, p := range sk.Pages() {
		stored[p.URL] = true
	}
	for _, u := range web.Pages() {
		if u != refused && !stored[u] {
			t.Errorf("page %s not stored", u)
		}
	}
	if stored[refused] {
		t.Error("the refused page was stored")
	}
	t.Logf("refused page: %d fetches, %s", web.Count(refused), fs[0].LastError)

	var dead []crawllog.Line
	if _, _, err := crawllog.ReadDir(crawllog.Dir(cfg.CrawlLog, cfg.FrontierKey()), func(l crawllog.Line) {
		if l.Outcome == crawllog.OutcomeDeadLettered {
			dead = append(dead, l)
		}
	}); err != nil {
		t.Fatal(err)
	}
	if len(dead) != 1 || dead[0].URL != refused || dead[0].Reason != frontier.ReasonSink || dead[0].Path != "" {
		t.Errorf("crawl log dead-letter lines %+v, want one of %s with reason sink and the seed's empty path", dead, refused)
	}
}

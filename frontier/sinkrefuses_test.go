package frontier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/frontier/session"
	"github.com/drover-crawl/drover/page"
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

// A page that every sink refuses for good is not parked forever: after
// MaxAttempts refusals it is dead-lettered with reason sink and listed
// among the failures, and the crawl completes around it.
func TestPageRefusedBySinkIsDeadLettered(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 20, CrossHost: true, Base: 67})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	seed(t, sched, cfg)
	refused := web.Seeds()[0]
	sk := refusingSink{Memory: sink.NewMemory(), refuse: refused}
	startFleet(t, cfg, []string{sched.addr}, sk, 2)
	st := waitDrained(t, []string{sched.addr}, cfg.ID, 2*time.Minute)
	if st.DeadLettered != 1 || st.FailedBy[frontier.ReasonSink] != 1 {
		t.Errorf("%d dead-lettered, failed by reason %v; want the refused page, reason sink", st.DeadLettered, st.FailedBy)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fs, _, err := session.Failures(ctx, []string{sched.addr}, session.DevToken, cfg.ID, frontier.ReasonSink)
	if err != nil || len(fs) != 1 || fs[0].URL != refused {
		t.Fatalf("failures with reason sink: %+v %v", fs, err)
	}
	if n := web.Count(refused); n != cfg.MaxAttempts {
		t.Errorf("the refused page was fetched %d times, want %d (max attempts)", n, cfg.MaxAttempts)
	}
	stored := map[string]bool{}
	for _, p := range sk.Pages() {
		stored[p.URL] = true
	}
	// Every other page the crawl reached is stored. (The refused page is
	// the first host's root: the pages only it links to are not reached.)
	for _, r := range web.Requests() {
		if r.URL != refused && web.Count(r.URL) > 0 && !stored[r.URL] && !isRobots(r.URL) {
			t.Errorf("page %s fetched but not stored", r.URL)
		}
	}
	t.Logf("refused page: %d fetches, %s", web.Count(refused), fs[0].LastError)
}

func isRobots(u string) bool { return len(u) > 11 && u[len(u)-11:] == "/robots.txt" }

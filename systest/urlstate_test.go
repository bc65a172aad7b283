package systest_test

// `starter url` against the test web's own log: during a crawl, a URL
// said done or failed was requested by then (the state is read before the
// server's count), and one said unknown was not; after it, every page is
// "ended" (the run's marks went with its queues) and was requested once.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// urlSample is how many URLs are asked about, during the crawl and after.
const urlSample = 200

func TestURLStateAgreesWithTheServer(t *testing.T) {
	// NoExtras: every page is one that becomes a page (no 404, no redirect).
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 200, CrossHost: true, NoExtras: true, Base: 143})
	s := startStack(t)
	cfg := s.newCampaign("urlstate", web, 2)
	cfg.PerHostDelay = new(10 * time.Millisecond)
	run := ctStartCampaign(t, s.temporal.Client(), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	key := ""
	await.For(t, time.Minute, 50*time.Millisecond, "a third of the web requested, and the run's key", func() error {
		if n := web.Total(); n < len(web.Pages())/3 {
			return fmt.Errorf("%d requests", n)
		}
		if key == "" {
			desc, err := s.temporal.Client().DescribeWorkflowExecution(ctx, cfg.ID, "")
			if err != nil {
				return err
			}
			if f := desc.WorkflowExecutionInfo.GetMemo().GetFields()["DroverFrontier"]; f != nil {
				key = string(f.GetData()[1 : len(f.GetData())-1]) // a JSON string
			}
		}
		if key == "" {
			return fmt.Errorf("no frontier key in the memo yet")
		}
		return nil
	})
	cl := session.Client{Token: session.DevToken}
	pages := web.Pages()
	counts := map[string]int{}
	asked := 0
	for _, i := range rand.Perm(len(pages))[:urlSample] {
		u := pages[i]
		st, err := cl.URLState(ctx, []string{s.sched.Addr()}, key, u)
		if err != nil {
			t.Fatal(err)
		}
		n := web.Count(u) // after the state: done then means requested
		counts[st.State]++
		asked++
		switch st.State {
		case session.URLDone, session.URLFailed:
			if n == 0 {
				t.Errorf("%s said %s during the crawl, but the server never saw it", u, st.State)
			}
			if st.State == session.URLDone && (st.Last == nil || st.Last.Status != 200 || st.Last.Date.IsZero()) {
				t.Errorf("%s said done during the crawl, with last capture %+v", u, st.Last)
			}
		case session.URLUnknown:
			if n > 0 {
				t.Errorf("%s said unknown, but the server had seen it", u)
			}
		}
	}
	if web.Total() >= len(pages) {
		t.Fatalf("the crawl was over while the states were read: it proves nothing")
	}
	t.Logf("during the crawl, %d URLs: %v", asked, counts)

	if st := ctResult(t, run, 5*time.Minute); st.PagesFetched == 0 {
		t.Fatalf("nothing fetched: %+v", st)
	}
	for _, i := range rand.Perm(len(pages))[:urlSample] {
		st, err := cl.URLState(ctx, []string{s.sched.Addr()}, key, pages[i])
		if err != nil {
			t.Fatal(err)
		}
		// A closed run's marks are gone with its queues: its URLs are
		// "ended", the failed ones "failed"; the fetch history, which
		// outlives the run, says when and with what status each was
		// captured.
		if st.State != session.URLEnded || web.Count(pages[i]) != 1 {
			t.Errorf("after the crawl, %s: %s, requested %d times", pages[i], st.State, web.Count(pages[i]))
		}
		if l := st.Last; l == nil || l.Status != 200 || l.Lineage != cfg.ID || l.Date.IsZero() || l.Date.After(time.Now()) {
			t.Errorf("after the crawl, %s: last capture %+v", pages[i], l)
		}
	}
}

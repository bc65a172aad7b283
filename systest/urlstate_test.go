package systest_test

// `starter url` against the test web's own log: during a crawl, a URL
// said done or failed was requested by then (the state is read before the
// server's count), and one said unknown was not; after it, every page is
// "ended" (the run's marks went with its queues) and was requested once.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
	key := awaitFrontierKey(t, s.services, web, cfg.ID)
	cl := session.Client{Token: session.DevToken}
	checkURLStatesDuring(t, cl, s.sched.Addr(), key, web)
	st := ctResult(t, run, 5*time.Minute)
	require.NotZero(t, st.PagesFetched, "nothing fetched: %+v", st)
	checkURLStatesAfter(t, cl, s.sched.Addr(), key, web, cfg.ID, 1)
}

// TestURLStateAcrossASchedulerKill: the scheduler, a process, SIGKILLed
// with a third of the web requested and started again on its seen store:
// its answers agree with the server as before the kill (a URL said done
// was requested; one said unknown was not), and after the crawl every
// page is ended with its last capture, requested at least once (a URL
// leased at the kill is fetched again).
func TestURLStateAcrossASchedulerKill(t *testing.T) {
	testenv.Long(t)
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 200, CrossHost: true, NoExtras: true, Base: 149})
	s := startServices(t)
	addr := freeAddr(t)
	seenPath := filepath.Join(t.TempDir(), "seen-0")
	sched := startSchedulerProc(t, addr, 0, 1, seenPath)
	startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())
	cfg := s.newCampaign("urlstate-kill", web, 2)
	cfg.PerHostDelay = new(10 * time.Millisecond)
	wait := runCampaign(t, s.temporal.Client(), cfg, 6*time.Minute)
	key := awaitFrontierKey(t, s, web, cfg.ID)
	atKill := web.Total()
	sched.Kill()
	startSchedulerProc(t, addr, 0, 1, seenPath)
	cl := session.Client{Token: testToken}
	checkURLStatesDuring(t, cl, addr, key, web)
	wait()
	checkURLStatesAfter(t, cl, addr, key, web, cfg.ID, 0)
	t.Logf("killed at request %d of %d pages; %d URLs requested twice", atKill, len(web.Pages()), len(web.Duplicates()))
}

// awaitFrontierKey waits until a third of web is requested, and returns
// the frontier key (ID~run) of campaign id from its memo.
func awaitFrontierKey(t *testing.T, s *services, web *testweb.Web, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	key := ""
	await.For(t, time.Minute, 50*time.Millisecond, "a third of the web requested, and the run's key", func() error {
		if n := web.Total(); n < len(web.Pages())/3 {
			return fmt.Errorf("%d requests", n)
		}
		if key == "" {
			desc, err := s.temporal.Client().DescribeWorkflowExecution(ctx, id, "")
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
	return key
}

// checkURLStatesDuring asks the scheduler at addr where urlSample pages
// stand while the crawl runs: one said done or failed was requested by
// then (the state is read before the server's count), one said unknown
// was not, and the crawl was not over once they were read.
func checkURLStatesDuring(t *testing.T, cl session.Client, addr, key string, web *testweb.Web) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pages := web.Pages()
	counts := map[string]int{}
	for _, i := range rand.Perm(len(pages))[:urlSample] {
		u := pages[i]
		st, err := cl.URLState(ctx, []string{addr}, key, u)
		require.NoError(t, err)
		n := web.Count(u) // after the state: done then means requested
		counts[st.State]++
		switch st.State {
		case session.URLDone, session.URLFailed:
			assert.NotZero(t, n, "%s said %s during the crawl, but the server never saw it", u, st.State)
			if st.State == session.URLDone && (st.Last == nil || st.Last.Status != 200 || st.Last.Date.IsZero()) {
				assert.Failf(t, "a done URL without its capture", "%s said done during the crawl, with last capture %+v", u, st.Last)
			}
		case session.URLUnknown:
			assert.Zero(t, n, "%s said unknown, but the server had seen it", u)
		}
	}
	require.Less(t, web.Total(), len(pages), "the crawl was over while the states were read: it proves nothing")
	t.Logf("during the crawl, %d URLs: %v", urlSample, counts)
}

// checkURLStatesAfter: once the crawl ended, urlSample pages are ended,
// with a last capture of status 200 in lineage, and were requested once
// (exactly, unless once is 0: then at least once).
func checkURLStatesAfter(t *testing.T, cl session.Client, addr, key string, web *testweb.Web, lineage string, once int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pages := web.Pages()
	for _, i := range rand.Perm(len(pages))[:urlSample] {
		st, err := cl.URLState(ctx, []string{addr}, key, pages[i])
		require.NoError(t, err)
		// A closed run's marks are gone with its queues: its URLs are
		// "ended", the failed ones "failed"; the fetch history, which
		// outlives the run, says when and with what status each was
		// captured.
		n := web.Count(pages[i])
		assert.Equal(t, session.URLEnded, st.State, "after the crawl, %s: state (requested %d times)", pages[i], n)
		assert.NotZero(t, n, "after the crawl, %s (%s): never requested", pages[i], st.State)
		if once > 0 {
			assert.Equal(t, once, n, "after the crawl, %s (%s): times requested", pages[i], st.State)
		}
		if l := st.Last; l == nil || l.Status != 200 || l.Lineage != lineage || l.Date.IsZero() || l.Date.After(time.Now()) {
			assert.Failf(t, "not the URL's last capture", "after the crawl, %s: last capture %+v", pages[i], l)
		}
	}
}

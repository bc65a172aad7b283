package systest_test

// An operator excludes part of a site while its crawl runs, through the
// campaign workflow's "rules" Update (what `starter exclude` sends). From
// the moment the Update returns, the test web's server sees no request
// for a matching URL; the matching URLs that were queued are settled as
// failures of reason "excluded"; every other page is fetched once and the
// campaign completes.

import (
	"context"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/workflows"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLiveExcludeMidCrawl(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 200, CrossHost: true, Base: 142})
	s := startStack(t)
	cfg := s.newCampaign("exclude", web, 2)
	cfg.PerHostDelay = new(15 * time.Millisecond)
	// Pages whose number ends in 3 or 7: a tenth of each host, spread over
	// every depth.
	const exclude = `/p/[0-9]*[37]\.html$`
	re := regexp.MustCompile(exclude)
	wait := runCampaign(t, s.temporal.Client(), cfg, 6*time.Minute)

	// The exclude lands mid-crawl, with pages ahead.
	awaitRequests(t, web, len(web.Pages())/3)
	res := sendRules(t, s.temporal.Client(), cfg.ID, workflows.RulesRequest{Exclude: exclude})
	returned := time.Now()
	before := web.Total()
	t.Logf("exclude returned at request %d of %d pages (rules version %d)", before, len(web.Pages()), res.Rules.Version)
	require.Less(t, before, len(web.Pages()), "the crawl was over (%d requests) before the exclude: it proves nothing", before)

	st := wait()
	var late, pagesBefore []string
	for _, r := range web.Requests() {
		if re.MatchString(r.URL) {
			if r.Start.After(returned) {
				late = append(late, r.URL)
			} else {
				pagesBefore = append(pagesBefore, r.URL)
			}
		}
	}
	assert.Empty(t, late, "%d matching URLs requested after the exclude returned", len(late))
	fs := excludedRecords(t, []string{s.sched.Addr()}, session.DevToken, st.Frontier)
	excluded := map[string]bool{}
	for _, f := range fs {
		excluded[f.URL] = true
		assert.Regexp(t, re, f.URL, "%s settled as excluded: it does not match %s", f.URL, exclude)
	}
	assert.NotEmpty(t, fs, "no URL settled as excluded: the exclude met nothing queued")
	// Every page is requested once, or is a matching one never requested.
	for _, u := range web.Missing() {
		assert.Regexp(t, re, u, "%s (not excluded) was never requested", u)
	}
	assert.Empty(t, web.Duplicates(), "requested more than once")
	t.Logf("%d matching pages requested before the exclude, %d settled as excluded; %d pages fetched in all",
		len(pagesBefore), len(fs), st.PagesFetched)
	for u := range excluded {
		assert.Zero(t, web.Count(u), "%s settled as excluded but requested", u)
	}
	// Every matching page is accounted for: fetched before the exclude,
	// or settled as excluded (the test web links every page many times).
	for _, u := range web.Pages() {
		if re.MatchString(u) && web.Count(u) == 0 {
			assert.True(t, excluded[u], "%s matches, was never requested and is not listed as excluded", u)
		}
	}
}

// The exclude outlives its scheduler: SIGKILLed right after the Update
// returned and started again on the same seen store, while the fetchers'
// sessions still carry the config from before the exclude, the scheduler
// settles the matching URLs RabbitMQ gives it back, and none is requested.
func TestLiveExcludeSurvivesSchedulerKill(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 200, CrossHost: true, Base: 145})
	s := startServices(t)
	addr := freeAddr(t)
	seenPath := filepath.Join(t.TempDir(), "seen-0")
	sched := startSchedulerProc(t, addr, 0, 1, seenPath)
	startWorkerProc(t, "worker-0", []string{addr}, s.temporal.Address(), s.kafka.Addr())
	cfg := s.newCampaign("exclude-kill", web, 2)
	cfg.PerHostDelay = new(15 * time.Millisecond)
	const exclude = `/p/[0-9]*[37]\.html$`
	re := regexp.MustCompile(exclude)
	wait := runCampaign(t, s.temporal.Client(), cfg, 6*time.Minute)
	awaitRequests(t, web, len(web.Pages())/5)
	sendRules(t, s.temporal.Client(), cfg.ID, workflows.RulesRequest{Exclude: exclude})
	returned := time.Now()
	sched.Kill()
	atKill := web.Total()
	require.Less(t, atKill, len(web.Pages()), "the crawl was over (%d requests) before the kill: nothing tested", atKill)
	startSchedulerProc(t, addr, 0, 1, seenPath)
	st := wait()
	var late []string
	for _, r := range web.Requests() {
		if re.MatchString(r.URL) && r.Start.After(returned) {
			late = append(late, r.URL)
		}
	}
	assert.Empty(t, late, "%d matching URLs requested after the exclude returned and the scheduler restarted", len(late))
	for _, u := range web.Missing() {
		assert.Regexp(t, re, u, "%s (not excluded) was never requested", u)
	}
	fs := excludedRecords(t, []string{addr}, testToken, st.Frontier)
	t.Logf("killed at request %d of %d pages; %d settled as excluded (failure records kept across the kill)", atKill, len(web.Pages()), len(fs))
	assert.NotEmpty(t, fs, "no URL settled as excluded")
}

// awaitRequests waits until the test web has served n requests.
func awaitRequests(t *testing.T, web *testweb.Web, n int) {
	t.Helper()
	await.For(t, 2*time.Minute, 10*time.Millisecond, fmt.Sprintf("%d requests served", n), func() error {
		if got := web.Total(); got < n {
			return fmt.Errorf("%d requests", got)
		}
		return nil
	})
}

// sendRules runs the campaign's rules Update as `starter exclude` and
// `starter host` do, and returns its result once every scheduler took it.
func sendRules(t *testing.T, c client.Client, id string, req workflows.RulesRequest) workflows.RulesResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h, err := c.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: workflows.UpdateRules, Args: []any{req},
		WaitForStage: client.WorkflowUpdateStageCompleted,
	})
	require.NoError(t, err)
	var res workflows.RulesResult
	require.NoError(t, h.Get(ctx, &res))
	return res
}

// excludedRecords are the failure records of reason excluded of a
// campaign's run.
func excludedRecords(t *testing.T, addrs []string, token, key string) []failure.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fs, _, err := session.Client{Token: token}.Failures(ctx, addrs, key, frontier.ReasonExcluded)
	require.NoError(t, err)
	return fs
}

package systest_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/failure"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
)

// A small site whose pages link to dead hosts of
// every kind (a name that does not resolve, a refused port, a listener
// that never answers, a TLS handshake that fails, a robots.txt that
// answers 503) is crawled with default settings; the campaign completes by
// itself within 3 minutes, every live page is fetched, and every dead URL
// is listed among the failures with its reason.
func TestDeadHostsCampaignCompletes(t *testing.T) {
	testenv.Long(t) // about 100 s of real retry backoffs
	web, err := testweb.StartDead(testweb.DeadConfig{Base: 65})
	require.NoError(t, err)
	defer web.Close()
	s := startStack(t)
	cfg := campaign.Config{
		ID:           fmt.Sprintf("dead-%d", rand.IntN(1e9)),
		Seeds:        web.Seeds(),
		Scope:        web.Scope(),
		AllowPrivate: true,
		Sinks:        []string{"kafka://" + s.kafka.Addr() + "/" + s.topic},
		CrawlLog:     t.TempDir(),
	}
	start := time.Now()
	run := ctStartCampaign(t, s.temporal.Client(), cfg)
	st := ctResult(t, run, 4*time.Minute)
	took := time.Since(start)
	require.Equal(t, campaign.StateCompleted, st.State, "campaign ended %s: %s", st.State, st.Reason)
	assert.LessOrEqual(t, took, 3*time.Minute, "the campaign took %s to complete (want within 3m)", took.Round(time.Second))
	if m := web.Web().Missing(); len(m) > 0 {
		assert.Failf(t, "live pages never fetched", "%d live pages never fetched, e.g. %v", len(m), m[:min(3, len(m))])
	}
	assert.Empty(t, web.Web().DisallowedHits(), "disallowed URLs fetched")
	for _, r := range web.DeadRequests() {
		assert.Equal(t, web.DeadHost(testweb.DeadRobots).Root+"/robots.txt", r.URL, "the host whose robots.txt answers 503 got a page request: %s", r.URL)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs, total, err := session.Client{Token: session.DevToken}.Failures(ctx, []string{s.sched.Addr()}, st.Frontier, "")
	require.NoError(t, err)
	got := map[string]failure.Record{}
	for _, f := range fs {
		got[f.URL] = f
	}
	var dead []string
	for u := range web.Dead() {
		dead = append(dead, u)
	}
	sort.Strings(dead)
	for _, u := range dead {
		want := web.Dead()[u]
		f, ok := got[u]
		if assert.True(t, ok, "dead URL %s not among the failures (want reason %s)", u, want) {
			assert.Equal(t, want, f.Reason, "dead URL %s failed with reason %s (%s), want %s", u, f.Reason, f.LastError, want)
		}
	}
	byReason := map[string]int{}
	for _, f := range fs {
		byReason[f.Reason]++
	}
	t.Logf("completed in %s: %d pages fetched, %d failure records %v", took.Round(time.Second), st.PagesFetched, total, byReason)
	checkDeadLines(t, crawllog.Dir(cfg.CrawlLog, st.Frontier), web.Dead())

	// As an operator sees it: the starter, from the outside.
	starter := filepath.Join(binaries(t), "starter")
	env := append(os.Environ(), "TEMPORAL_ADDRESS="+s.temporal.Address(), "TEMPORAL_NAMESPACE="+s.temporal.Namespace(),
		"DROVER_SCHEDULER="+s.sched.Addr(), "DROVER_TOKEN="+session.DevToken)
	runStarter := func(args ...string) string {
		cmd := exec.Command(starter, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "starter %s:\n%s", strings.Join(args, " "), out)
		return string(out)
	}
	status := runStarter("status", cfg.ID)
	failures := runStarter("failures", cfg.ID)
	t.Logf("starter status %s:\n%s", cfg.ID, status)
	t.Logf("starter failures %s:\n%s", cfg.ID, failures)
	for _, u := range dead {
		assert.Contains(t, failures, u, "starter failures does not list %s", u)
	}
	for _, reason := range []string{"dns", "refused", "timeout", "tls", "robots"} {
		assert.Contains(t, failures, reason+" ", "starter failures shows no %s failure", reason)
	}
	t.Logf("starter report %s:\n%s", cfg.ID, runStarter("report", cfg.ID, "--top", "5"))
}

// checkDeadLines: every dead URL has a crawl log line that settles it, a
// scheduler's dead-letter line or a stored failure, with its reason.
func checkDeadLines(t *testing.T, dir string, dead map[string]string) {
	t.Helper()
	settled := map[string]string{}
	var n, deadLettered int
	_, _, err := crawllog.ReadDir(dir, func(l crawllog.Line) {
		n++
		switch l.Outcome {
		case crawllog.OutcomeDeadLettered:
			deadLettered++
			settled[l.URL] = l.Reason
		case crawllog.OutcomeFailed:
			settled[l.URL] = l.Reason
		}
	})
	require.NoError(t, err)
	t.Logf("crawl log: %d lines, %d of URLs dead-lettered", n, deadLettered)
	for u, want := range dead {
		got, ok := settled[u]
		if assert.True(t, ok, "dead URL %s: crawl log reason %q (logged: %v), want %s", u, got, ok, want) {
			assert.Equal(t, want, got, "dead URL %s: crawl log reason %q (logged: %v), want %s", u, got, ok, want)
		}
	}
}

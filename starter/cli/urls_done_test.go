package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/crawllog"
)

// `urls --state done` lists a host's stored URLs from the run's crawl
// log, in URL order, a page at a time: pages of any status, once each
// however many lines they have (a redelivery), and not the host's
// retries, failures or robots.txt, nor another host's pages.
func TestURLsDoneFromTheCrawlLog(t *testing.T) {
	root := t.TempDir()
	const key = "news~r1"
	dir := crawllog.Dir(root, key)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	line := func(outcome string, status int, u string) string {
		b, err := json.Marshal(crawllog.Line{Outcome: outcome, Status: status, URL: u})
		require.NoError(t, err)
		return string(b) + "\n"
	}
	w1 := line(crawllog.OutcomePage, 200, "http://a.example:8080/c") +
		line(crawllog.OutcomePage, 404, "http://a.example:8080/a") +
		line(crawllog.OutcomeRetry, 503, "http://a.example:8080/retried") +
		line(crawllog.OutcomeRobots, 200, "http://a.example:8080/robots.txt") +
		line(crawllog.OutcomePage, 200, "http://b.example/x")
	w2 := line(crawllog.OutcomePage, 200, "http://A.example:8080/b") +
		line(crawllog.OutcomePage, 200, "http://a.example:8080/c") + // redelivered
		line(crawllog.OutcomeFailed, 0, "http://a.example:8080/gone") +
		"not json\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w1"+crawllog.Ext), []byte(w1), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "w2"+crawllog.Ext), []byte(w2), 0o600))
	app := func() *App {
		return &App{Dial: func(context.Context, Env) (Campaigns, error) { return nil, errors.New("no Temporal in this test") }}
	}

	code, out, errOut := runApp(t, app(), "urls", key, "--host", "a.example", "--state", "done", "--log", root, "--limit", "2")
	require.Equal(t, ExitOK, code, errOut)
	assert.Equal(t, "http://A.example:8080/b\nhttp://a.example:8080/a\n", out)
	assert.Contains(t, errOut, "--after 'http://a.example:8080/a'")

	code, out, errOut = runApp(t, app(), "urls", key, "--host", "a.example", "--state", "done", "--log", root, "--after", "http://a.example:8080/a", "--json")
	require.Equal(t, ExitOK, code, errOut)
	assert.JSONEq(t, `{"urls": ["http://a.example:8080/c"]}`, out)

	code, _, errOut = runApp(t, app(), "urls", "other~r1", "--host", "a.example", "--state", "done", "--log", root)
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errOut, "no crawl log files in "+crawllog.Dir(root, "other~r1"))

	code, _, errOut = runApp(t, app(), "urls", "news", "--host", "a.example", "--state", "done", "--log", root)
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errOut, "give the run's key, ID~RUN")

	code, _, errOut = runApp(t, app(), "urls", key, "--host", "a.example", "--state", "held", "--log", root)
	assert.Equal(t, ExitUsage, code)
	assert.True(t, strings.Contains(errOut, "--log reads the crawl log"), errOut)

	code, _, errOut = runApp(t, app(), "urls", key, "--host", "a.example", "--state", "waiting")
	assert.Equal(t, ExitUsage, code)
	assert.Contains(t, errOut, `--state "waiting": give one of queued, leased, held, parked, failed or done`)
}

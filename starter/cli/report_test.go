package cli

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/workflows"
)

// writeLog writes lines as worker w's crawl log of run key under root.
func writeLog(t *testing.T, root, key, w string, lines ...crawllog.Line) {
	t.Helper()
	f, err := crawllog.Create(root, key, w)
	require.NoError(t, err)
	for _, l := range lines {
		require.NoError(t, f.Write(l))
	}
	require.NoError(t, f.Close())
}

func completedWithLog(fake *fakeTemporal, id, key, dir string, fetched, failed int64) {
	fake.add(id, workflows.Status{State: campaign.StateCompleted, PagesFetched: fetched, PagesFailed: failed, Frontier: key, CrawlLog: dir},
		Execution{Status: StatusCompleted, Frontier: key})
}

func TestReportFromTheCrawlLog(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "c1~r1", "worker-a",
		crawllog.Line{Outcome: crawllog.OutcomeRobots, URL: "http://a.example/robots.txt", Status: 404, Size: 9},
		crawllog.Line{Outcome: crawllog.OutcomePage, URL: "http://a.example/", Status: 200, Size: 100, MIME: "text/html"})
	writeLog(t, dir, "c1~r1", "worker-b",
		crawllog.Line{Outcome: crawllog.OutcomePage, URL: "http://a.example/x", Via: "http://a.example/", Path: "L", Status: 200, Size: 50, MIME: "text/html"},
		crawllog.Line{Outcome: crawllog.OutcomeFailed, URL: "http://a.example/y", Via: "http://a.example/", Path: "L", Reason: "timeout"})
	writeLog(t, dir, "c1~r0", "worker-a", crawllog.Line{Outcome: crawllog.OutcomePage, URL: "http://a.example/old"})
	fake := newFake()
	completedWithLog(fake, "c1", "c1~r1", dir, 2, 1)

	code, out, errOut := run(t, fake, nil, "report", "c1", "--json")
	require.Equal(t, ExitOK, code, errOut)
	var rv ReportView
	require.NoError(t, json.Unmarshal([]byte(out), &rv))
	assert.Equal(t, crawllog.Totals{Attempts: 4, Pages: 2, Failed: 1, Robots: 1, Bytes: 159}, rv.Total, "the latest run's files only")
	assert.Len(t, rv.Files, 2)
	require.NotNil(t, rv.Status)
	assert.True(t, rv.Agrees)

	code, out, errOut = run(t, fake, nil, "report", "c1")
	require.Equal(t, ExitOK, code, errOut)
	assert.Contains(t, out, "Status (completed): 2 pages fetched, 1 failed: the log agrees\n")
	assert.Contains(t, out, "SEED")
	assert.Contains(t, out, "http://a.example/")

	// The campaign's counts differ: said, not hidden.
	completedWithLog(fake, "c2", "c1~r1", dir, 3, 1)
	code, out, _ = run(t, fake, nil, "report", "c2")
	require.Equal(t, ExitOK, code)
	assert.Contains(t, out, "3 pages fetched, 1 failed: the log DIFFERS")
}

func TestReportWithoutTemporalReadsTheNamedLog(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, "c1~r1", "w", crawllog.Line{Outcome: crawllog.OutcomePage, URL: "http://a.example/", Status: 200})
	code, out, errOut := run(t, newFake(), nil, "report", "c1~r1", "--log", dir, "--json")
	require.Equal(t, ExitOK, code, errOut)
	var rv ReportView
	require.NoError(t, json.Unmarshal([]byte(out), &rv))
	assert.Equal(t, int64(1), rv.Total.Pages)
	assert.Nil(t, rv.Status)
	assert.False(t, rv.Agrees, "nothing to agree with")
}

func TestReportErrors(t *testing.T) {
	fake := newFake()
	fake.add("nolog", workflows.Status{State: campaign.StateCompleted, Frontier: "nolog~r"}, Execution{Status: StatusCompleted, Frontier: "nolog~r"})
	completedWithLog(fake, "empty", "empty~r", t.TempDir(), 0, 0)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"report", "nolog"}, "campaign nolog keeps no crawl log (start it with --crawl-log DIR), or name its directory with --log\n"},
		{[]string{"report", "empty"}, "no crawl log files in "},
		{[]string{"report", "missing"}, "no campaign missing\n"},
	}
	for _, c := range cases {
		code, out, errOut := run(t, fake, nil, c.args...)
		assert.Equal(t, ExitFailure, code, c.args)
		assert.Empty(t, out)
		assert.Contains(t, errOut, c.want, c.args)
	}
}

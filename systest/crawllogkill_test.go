//go:build linux

// Linux only: the kill waits for a worker in fsync (warcInFsync).

package systest_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
)

// TestCrawlLogSurvivesWorkerKill SIGKILLs one of two worker processes
// while its WARC sink is in fsync (TestWorkerKilledMidFsyncWARC's moment:
// pages written, their Stores not returned, so no line of theirs yet), on
// a campaign storing into WARC files with a crawl log. After the
// campaign: every line the log has for a page points at a record of that
// page with its digest (no line for a page not stored), every page in
// the WARC files has a line (the dead worker's unreported pages were
// fetched, stored and logged again), the dead worker's requests without
// a line are of URLs logged later, no URL has more lines than the server
// counted requests of it, and no line is cut.
func TestCrawlLogSurvivesWorkerKill(t *testing.T) {
	testenv.Long(t)
	warcDir, logDir := t.TempDir(), t.TempDir() // on a disk: an fsync takes long enough to be seen
	k := startCrawlLogKill(t, 172, "warc:"+warcDir, logDir)
	k.awaitUnderWay()
	var victim string
	await.For(t, 30*time.Second, time.Millisecond, "a worker in fsync on its WARC file", func() error {
		for id, p := range k.procs {
			f, err := stoppedInFsync(p.PID(), warcDir)
			if err != nil {
				return err
			}
			if f != "" {
				victim = id
				k.kill(id)
				return nil
			}
		}
		require.NotEmpty(t, k.web.Missing(), "every page was requested before a worker was seen in fsync")
		return errors.New("no worker thread in fsync on a WARC file")
	})
	requestedAtKill := k.web.Total()
	dups := k.finish()
	t.Logf("killed %s in fsync with %d requests served; %d URLs requested more than once", victim, requestedAtKill, len(dups))

	var lines []crawllog.Line // of fetches: the scheduler's are left out
	files, bad, err := crawllog.ReadDir(crawllog.Dir(logDir, k.frontier), func(l crawllog.Line) {
		if l.Outcome != crawllog.OutcomeDropped && l.Outcome != crawllog.OutcomeDeadLettered {
			lines = append(lines, l)
		}
	})
	require.NoError(t, err)
	assert.Zero(t, bad, "%d lines cut or unreadable in %v", bad, files)
	workers := 0
	for _, f := range files {
		if strings.HasPrefix(filepath.Base(f), "crawl-worker-") {
			workers++
		}
	}
	assert.Equal(t, 2, workers, "crawl log files %v, want one per worker", files)
	served := map[string]int{}
	for _, r := range k.web.Requests() {
		served[r.URL]++
	}
	logged, pageLines := map[string]int{}, 0
	for _, l := range lines {
		logged[l.URL]++
		if l.Outcome == crawllog.OutcomePage {
			pageLines++
			for _, loc := range l.Stored {
				checkWARCRecord(t, l, loc)
			}
			assert.Len(t, l.Stored, 1, "%s: locations %v, want its WARC record", l.URL, l.Stored)
		}
	}
	unlogged := 0
	for u, n := range served {
		switch {
		case logged[u] > n:
			assert.Failf(t, "more lines than requests", "%s: %d lines, %d requests", u, logged[u], n)
		case logged[u] < n:
			// A request the dead worker made and never stored: its URL
			// went back and was fetched and logged again.
			unlogged += n - logged[u]
			assert.NotZero(t, logged[u], "%s: requested %d times, no line", u, n)
		}
	}
	stored := map[string]bool{}
	for _, r := range readWARCDir(t, warcDir) {
		stored[r.uri] = true
	}
	for u := range stored {
		assert.NotZero(t, logged[u], "%s is in the WARC files and has no crawl log line", u)
	}
	t.Logf("%d requests, %d lines in %d files (%d of pages), %d URLs stored in WARC; %d requests of the dead worker without a line",
		k.web.Total(), len(lines), len(files), pageLines, len(stored), unlogged)
	assert.NotZero(t, unlogged, "every request has its line: the kill, in fsync, hit no page whose Store had not returned")
}

// startCrawlLogKill is startSinkKill with a crawl log in logDir: the web
// (4 hosts of 75 pages on 127.base.0.x), two worker processes and the
// campaign, a fifth of the web requested.
func startCrawlLogKill(t *testing.T, base byte, sinkURI, logDir string) *sinkKill {
	t.Helper()
	return startSinkKillWith(t, "logkill", base, sinkURI, func(string) []string { return nil },
		func(c *campaign.Config) { c.CrawlLog = logDir })
}

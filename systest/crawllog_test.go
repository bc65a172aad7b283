package systest_test

// The crawl log of a crawl of the test web, with assets, a redirect and a
// 404, stored in WARC files and Kafka: one line per request the server
// counted, robots.txt included; every WARC location reads back a record
// with the line's digest; and `starter report` agrees with the log and
// with `status --json`.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nlnwa/gowarc"
	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/starter/cli"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

func TestCrawlLogAccountsForEveryRequest(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 30, CrossHost: true, Assets: true, Base: 171})
	s := startStack(t)
	warcDir, logDir := t.TempDir(), t.TempDir()
	cfg := s.newCampaign("crawllog", web, 2)
	cfg.Sinks = append(cfg.Sinks, "warc:"+warcDir)
	cfg.CrawlLog = logDir
	logTopic := "crawllog-" + cfg.ID
	cfg.CrawlLogTopic = "kafka://" + s.kafka.Addr() + "/" + logTopic + "?create=true&partitions=4" // the partitions readTopic reads
	cfg.PerHostDelay = new(time.Millisecond)
	st := runCampaign(t, s.temporal.Client(), cfg, 5*time.Minute)()

	// lines are the fetch attempts, dropped the scheduler's lines of the
	// URLs robots.txt forbids.
	var lines, dropped []crawllog.Line
	files, bad, err := crawllog.ReadDir(crawllog.Dir(logDir, st.Frontier), func(l crawllog.Line) {
		if l.Outcome == crawllog.OutcomeDropped {
			dropped = append(dropped, l)
			return
		}
		lines = append(lines, l)
	})
	require.NoError(t, err)
	assert.Zero(t, bad, "unreadable lines in %v", files)
	t.Logf("campaign %s: %d pages, %d failed; the server counted %d requests, the crawl log in %d files has %d lines of fetches and %d of URLs dropped",
		cfg.ID, st.PagesFetched, st.PagesFailed, web.Total(), len(files), len(lines), len(dropped))
	assert.NotEmpty(t, dropped, "no line for the URLs robots.txt forbids")
	for _, l := range dropped {
		if !web.Disallowed(l.URL) || l.Reason != "robots" || l.Via == "" || l.Path == "" {
			assert.Failf(t, "a dropped line not of a link robots.txt forbids", "a dropped line of %s (reason %s, via %q, path %q): not a link robots.txt forbids", l.URL, l.Reason, l.Via, l.Path)
		}
	}

	// One line per request, URL by URL.
	served := map[string]int{}
	for _, r := range web.Requests() {
		served[r.URL]++
	}
	logged := map[string]int{}
	for _, l := range lines {
		logged[l.URL]++
	}
	assert.Equal(t, web.Total(), len(lines), "crawl log lines, against the requests the server counted")
	for _, u := range slices.Sorted(maps.Keys(served)) {
		assert.Equal(t, served[u], logged[u], "%s: lines, against the times requested", u)
	}
	for u, n := range logged {
		assert.NotZero(t, served[u], "%s: %d lines, never requested", u, n)
	}
	checkTopicLines(t, lines, readTopic(t, s.kafka.Addr(), logTopic, len(lines)))
	checkHopPaths(t, web, lines)
	checkLocations(t, lines, readTopic(t, s.kafka.Addr(), s.topic, int(st.PagesFetched)))
	checkReport(t, s, cfg.ID, lines, int64(len(dropped)), st.PagesFetched, st.PagesFailed)
	checkDoneURLs(t, s, cfg.ID, web, lines)
}

// checkTopicLines: the crawl log's topic holds the workers' lines as the
// files do, one record each, keyed by URL.
func checkTopicLines(t *testing.T, lines []crawllog.Line, recs []kafka.Message) {
	t.Helper()
	inFiles := map[string]int{}
	for _, l := range lines {
		b, _ := json.Marshal(l)
		inFiles[string(b)]++
	}
	for _, m := range recs {
		var l crawllog.Line
		if err := json.Unmarshal(m.Value, &l); !assert.NoError(t, err, "topic record %s: %q", m.Key, m.Value) ||
			!assert.Equal(t, string(m.Key), l.URL, "topic record %s: %q: its line's URL", m.Key, m.Value) {
			continue
		}
		b, _ := json.Marshal(l)
		assert.NotZero(t, inFiles[string(b)], "a line in the topic and not in the files: %s", b)
		inFiles[string(b)]--
	}
	t.Logf("crawl log topic: %d records, the files %d lines of fetches", len(recs), len(lines))
	assert.Equal(t, len(lines), len(recs), "records in the crawl log topic, against the lines of fetches in the files")
}

// checkHopPaths: a seed's path is empty, a robots.txt's P, an asset's
// ends in E, and every other URL has a via and a path.
func checkHopPaths(t *testing.T, web *testweb.Web, lines []crawllog.Line) {
	t.Helper()
	seeds, assets := map[string]bool{}, map[string]bool{}
	for _, u := range web.Seeds() {
		seeds[u] = true
	}
	for _, u := range web.Assets() {
		assets[u] = true
	}
	embeds := 0
	for _, l := range lines {
		switch {
		case l.Outcome == crawllog.OutcomeRobots:
			assert.Equal(t, "P", l.Path, "robots line %s: path", l.URL)
			assert.True(t, strings.HasSuffix(l.URL, "/robots.txt"), "robots line %s with path %q", l.URL, l.Path)
		case seeds[l.URL]:
			assert.Empty(t, l.Path, "seed %s: path (via %q)", l.URL, l.Via)
			assert.Empty(t, l.Via, "seed %s: via (path %q)", l.URL, l.Path)
		case l.Path == "" || l.Via == "":
			assert.Failf(t, "a line without a path or a via", "%s: path %q via %q, want both", l.URL, l.Path, l.Via)
		case assets[l.URL]:
			if embeds == 0 {
				b, _ := json.Marshal(l)
				t.Logf("an asset's line: %s", b)
			}
			embeds++
			assert.True(t, strings.HasSuffix(l.Path, "E"), "asset %s: path %q does not end in E", l.URL, l.Path)
		}
	}
	assert.GreaterOrEqual(t, embeds, len(assets), "lines of assets, against the assets")
}

// checkLocations reads the record at every WARC location of the log and
// compares it with its line: URI, digest, and the digest of the payload
// it holds; and finds every Kafka location among the topic's records,
// keyed by the line's URL with a value of its digest. Every stored page
// has a WARC and a Kafka location, each Kafka one its own record.
func checkLocations(t *testing.T, lines []crawllog.Line, recs []kafka.Message) {
	t.Helper()
	topic := map[string]kafka.Message{}
	for _, m := range recs {
		topic[fmt.Sprintf("%s/%d/%d", m.Topic, m.Partition, m.Offset)] = m
	}
	read, kafkaSeen := 0, map[string]string{}
	for _, l := range lines {
		if l.Outcome != crawllog.OutcomePage && l.Outcome != crawllog.OutcomeFailed {
			assert.Empty(t, l.Stored, "%s (%s) has locations", l.URL, l.Outcome)
			continue
		}
		kinds := map[string]int{}
		for _, loc := range l.Stored {
			kinds[loc.Kind]++
			switch loc.Kind {
			case "warc":
				checkWARCRecord(t, l, loc)
				read++
			case "kafka":
				k := fmt.Sprintf("%s/%d/%d", loc.Topic, loc.Partition, loc.Offset)
				other, dup := kafkaSeen[k]
				assert.False(t, dup, "%s and %s both at Kafka %s", other, l.URL, k)
				kafkaSeen[k] = l.URL
				m, ok := topic[k]
				if !ok || string(m.Key) != l.URL || page.PayloadDigest(m.Value) != l.Digest {
					assert.Failf(t, "a Kafka location without the line's page", "%s: Kafka %s holds %q (found %v), not the line's page", l.URL, k, m.Key, ok)
				}
			}
		}
		assert.Equal(t, 1, kinds["warc"], "%s: locations %v, want one WARC and one Kafka", l.URL, l.Stored)
		assert.Equal(t, 1, kinds["kafka"], "%s: locations %v, want one WARC and one Kafka", l.URL, l.Stored)
	}
	t.Logf("%d WARC records read back at their logged offsets, %d Kafka records found at theirs (of %d in the topic)", read, len(kafkaSeen), len(recs))
}

func checkWARCRecord(t *testing.T, l crawllog.Line, loc page.Location) {
	t.Helper()
	r, err := gowarc.NewWarcFileReader(loc.File, loc.Offset)
	require.NoError(t, err)
	defer r.Close()
	rec, off, _, err := r.Next()
	if !assert.NoError(t, err, "%s: no record at %s offset %d", l.URL, filepath.Base(loc.File), loc.Offset) {
		return
	}
	defer rec.Close()
	assert.Equal(t, loc.Offset, off, "%s: the record's offset, against the logged one", l.URL)
	h := rec.WarcHeader()
	assert.Equal(t, l.URL, h.Get(gowarc.WarcTargetURI), "%s: the URI of the record at %s:%d", l.URL, filepath.Base(loc.File), loc.Offset)
	if l.Outcome == crawllog.OutcomeFailed {
		return // a failure's record is its metadata: no payload
	}
	if l.Revisit != "" {
		// A revisit's digest is its earlier capture's, and it holds no
		// payload of its own.
		if rec.Type() != gowarc.Revisit || h.Get(gowarc.WarcPayloadDigest) != l.Digest || !strings.HasSuffix(h.Get(gowarc.WarcProfile), l.Revisit) {
			assert.Failf(t, "not the line's revisit", "%s: a %s record (%s, %s) at %d, want a %s revisit of digest %s", l.URL, rec.Type(), h.Get(gowarc.WarcProfile), h.Get(gowarc.WarcPayloadDigest), loc.Offset, l.Revisit, l.Digest)
		}
		return
	}
	if !assert.Equal(t, gowarc.Response, rec.Type(), "%s: a %s record at %d, want a response", l.URL, rec.Type(), loc.Offset) {
		return
	}
	assert.Equal(t, l.Digest, h.Get(gowarc.WarcPayloadDigest), "%s: WARC-Payload-Digest, against the logged digest", l.URL)
	raw, err := rec.Block().RawBytes()
	require.NoError(t, err)
	block, err := io.ReadAll(raw)
	require.NoError(t, err)
	_, body, _ := bytes.Cut(block, []byte("\r\n\r\n"))
	assert.Equal(t, l.Digest, page.PayloadDigest(body), "%s: the digest of the record's payload (%d bytes), against the logged one", l.URL, len(body))
	assert.Equal(t, l.Size, int64(len(body)), "%s: the size of the record's payload, against the logged one", l.URL)
}

// checkDoneURLs runs `starter urls ID --host H --state done` for each host
// of the web: the URLs it lists, from the crawl log the campaign named,
// are the host's pages the log holds, each once (the log's lines being
// checked against the server's requests above).
func checkDoneURLs(t *testing.T, s *stack, id string, web *testweb.Web, lines []crawllog.Line) {
	t.Helper()
	for _, hp := range web.Hosts() {
		host, _, _ := cutPort(hp)
		want := map[string]bool{}
		for _, l := range lines {
			if u, err := url.Parse(l.URL); err == nil && l.Outcome == crawllog.OutcomePage && u.Hostname() == host {
				want[l.URL] = true
			}
		}
		var out, errb bytes.Buffer
		app := &cli.App{
			Env: cli.Env{Env: envconf.Env{TemporalAddress: s.temporal.Address(), TemporalNamespace: s.temporal.Namespace(), Schedulers: []string{s.sched.Addr()}, Token: session.DevToken}},
			Out: &out, Err: &errb, Dial: cli.DialTemporal,
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		code := app.Run(ctx, []string{"urls", id, "--host", host, "--state", "done", "--limit", "1000", "--json"})
		cancel()
		require.Zero(t, code, "starter urls --state done: exit code: %s", errb.String())
		var page struct {
			URLs []string `json:"urls"`
			Next string   `json:"next"`
		}
		require.NoError(t, json.Unmarshal(out.Bytes(), &page), "starter urls --json:\n%s", out.String())
		got := map[string]bool{}
		for _, u := range page.URLs {
			got[u] = true
		}
		msg := fmt.Sprintf("starter urls %s --host %s --state done listed %d URLs (%d distinct, next %q); the crawl log has %d pages of the host",
			id, host, len(page.URLs), len(got), page.Next, len(want))
		assert.NotEmpty(t, want, msg)
		assert.Equal(t, want, got, msg)
		assert.Len(t, page.URLs, len(got), msg)
		assert.Empty(t, page.Next, msg)
	}
}

// checkReport runs `starter report ID --json` and compares its totals with
// the log's and the campaign's own.
func checkReport(t *testing.T, s *stack, id string, lines []crawllog.Line, dropped, fetched, failed int64) {
	t.Helper()
	var out, errb bytes.Buffer
	app := func() *cli.App { // one a Run: Run closes its Temporal client
		return &cli.App{
			Env: cli.Env{Env: envconf.Env{TemporalAddress: s.temporal.Address(), TemporalNamespace: s.temporal.Namespace(), Schedulers: []string{s.sched.Addr()}, Token: session.DevToken}},
			Out: &out, Err: &errb, Dial: cli.DialTemporal, Stats: sessiontest.CampaignStats,
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code := app().Run(ctx, []string{"report", id, "--json"})
	require.Zero(t, code, "starter report: exit code: %s", errb.String())
	var rv cli.ReportView
	require.NoError(t, json.Unmarshal(out.Bytes(), &rv), "starter report --json:\n%s", out.String())
	var pages, fails, robots, nbytes int64
	for _, l := range lines {
		switch l.Outcome {
		case crawllog.OutcomePage:
			pages++
		case crawllog.OutcomeFailed:
			fails++
		case crawllog.OutcomeRobots:
			robots++
		}
		nbytes += l.Size
	}
	tot := rv.Total
	t.Logf("report: %d attempts, %d pages, %d failed, %d errors, %d robots.txt, %d bytes; %d hosts, %d MIME types, %d statuses, %d seeds",
		tot.Attempts, tot.Pages, tot.Failed, tot.Errors, tot.Robots, tot.Bytes, len(rv.ByHost), len(rv.ByMIME), len(rv.ByStatus), len(rv.BySeed))
	assert.Equal(t, int64(len(lines)), tot.Attempts, "report totals %+v: attempts, against the log's lines of fetches", tot)
	assert.Equal(t, pages, tot.Pages, "report totals %+v: pages, against the log's", tot)
	assert.Equal(t, fails, tot.Failed, "report totals %+v: failed, against the log's", tot)
	assert.Equal(t, robots, tot.Robots, "report totals %+v: robots.txt, against the log's", tot)
	assert.Equal(t, nbytes, tot.Bytes, "report totals %+v: bytes, against the log's", tot)
	assert.Equal(t, dropped, tot.Dropped, "report totals %+v: dropped, against the log's", tot)
	if assert.NotNil(t, rv.Status, "report's status (agrees %v); the campaign's result: %d fetched, %d failed", rv.Agrees, fetched, failed) {
		assert.Equal(t, fetched, rv.Status.PagesFetched, "report's status %+v: pages fetched, against the campaign's result", rv.Status)
		assert.Equal(t, failed, rv.Status.PagesFailed, "report's status %+v: pages failed, against the campaign's result", rv.Status)
	}
	assert.True(t, rv.Agrees, "report's status %+v does not agree; the campaign's result: %d fetched, %d failed", rv.Status, fetched, failed)
	assert.Equal(t, fetched, tot.Pages, "the log's pages, against the campaign's count")
	assert.Equal(t, failed, tot.Failed, "the log's failed, against the campaign's count")
	out.Reset()
	code = app().Run(ctx, []string{"report", id, "--top", "4"})
	require.Zero(t, code, "starter report: exit code: %s", errb.String())
	t.Logf("starter report %s --top 4:\n%s", id, out.String())
	for name, rows := range map[string][]crawllog.Row{"host": rv.ByHost, "MIME type": rv.ByMIME, "status": rv.ByStatus, "seed": rv.BySeed} {
		var sum crawllog.Totals
		for _, r := range rows {
			sum.Attempts += r.Attempts
			sum.Pages += r.Pages
			sum.Bytes += r.Bytes
			sum.Dropped += r.Dropped
		}
		assert.Equal(t, crawllog.Totals{Attempts: tot.Attempts, Pages: tot.Pages, Bytes: tot.Bytes, Dropped: tot.Dropped}, sum, "by %s: the rows' sums; total %+v", name, tot)
	}
}

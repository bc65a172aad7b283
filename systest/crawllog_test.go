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
	if err != nil {
		t.Fatal(err)
	}
	if bad > 0 {
		t.Errorf("%d unreadable lines in %v", bad, files)
	}
	t.Logf("campaign %s: %d pages, %d failed; the server counted %d requests, the crawl log in %d files has %d lines of fetches and %d of URLs dropped",
		cfg.ID, st.PagesFetched, st.PagesFailed, web.Total(), len(files), len(lines), len(dropped))
	if len(dropped) == 0 {
		t.Errorf("no line for the URLs robots.txt forbids")
	}
	for _, l := range dropped {
		if !web.Disallowed(l.URL) || l.Reason != "robots" || l.Via == "" || l.Path == "" {
			t.Errorf("a dropped line of %s (reason %s, via %q, path %q): not a link robots.txt forbids", l.URL, l.Reason, l.Via, l.Path)
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
	if len(lines) != web.Total() {
		t.Errorf("%d crawl log lines, the server counted %d requests", len(lines), web.Total())
	}
	for _, u := range slices.Sorted(maps.Keys(served)) {
		if served[u] != logged[u] {
			t.Errorf("%s: requested %d times, %d lines", u, served[u], logged[u])
		}
	}
	for u, n := range logged {
		if served[u] == 0 {
			t.Errorf("%s: %d lines, never requested", u, n)
		}
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
		if err := json.Unmarshal(m.Value, &l); err != nil || l.URL != string(m.Key) {
			t.Errorf("topic record %s: %q (%v)", m.Key, m.Value, err)
			continue
		}
		b, _ := json.Marshal(l)
		if inFiles[string(b)] == 0 {
			t.Errorf("a line in the topic and not in the files: %s", b)
		}
		inFiles[string(b)]--
	}
	t.Logf("crawl log topic: %d records, the files %d lines of fetches", len(recs), len(lines))
	if len(recs) != len(lines) {
		t.Errorf("%d records in the crawl log topic, %d lines of fetches in the files", len(recs), len(lines))
	}
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
			if l.Path != "P" || !strings.HasSuffix(l.URL, "/robots.txt") {
				t.Errorf("robots line %s with path %q", l.URL, l.Path)
			}
		case seeds[l.URL]:
			if l.Path != "" || l.Via != "" {
				t.Errorf("seed %s: path %q via %q", l.URL, l.Path, l.Via)
			}
		case l.Path == "" || l.Via == "":
			t.Errorf("%s: path %q via %q, want both", l.URL, l.Path, l.Via)
		case assets[l.URL]:
			if embeds == 0 {
				b, _ := json.Marshal(l)
				t.Logf("an asset's line: %s", b)
			}
			embeds++
			if !strings.HasSuffix(l.Path, "E") {
				t.Errorf("asset %s: path %q does not end in E", l.URL, l.Path)
			}
		}
	}
	if embeds < len(assets) {
		t.Errorf("%d lines of assets, %d assets", embeds, len(assets))
	}
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
			if len(l.Stored) > 0 {
				t.Errorf("%s (%s) has locations %v", l.URL, l.Outcome, l.Stored)
			}
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
				if other, dup := kafkaSeen[k]; dup {
					t.Errorf("%s and %s both at Kafka %s", other, l.URL, k)
				}
				kafkaSeen[k] = l.URL
				m, ok := topic[k]
				if !ok || string(m.Key) != l.URL || page.PayloadDigest(m.Value) != l.Digest {
					t.Errorf("%s: Kafka %s holds %q (found %v), not the line's page", l.URL, k, m.Key, ok)
				}
			}
		}
		if kinds["warc"] != 1 || kinds["kafka"] != 1 {
			t.Errorf("%s: locations %v, want one WARC and one Kafka", l.URL, l.Stored)
		}
	}
	t.Logf("%d WARC records read back at their logged offsets, %d Kafka records found at theirs (of %d in the topic)", read, len(kafkaSeen), len(recs))
}

func checkWARCRecord(t *testing.T, l crawllog.Line, loc page.Location) {
	t.Helper()
	r, err := gowarc.NewWarcFileReader(loc.File, loc.Offset)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	rec, off, _, err := r.Next()
	if err != nil {
		t.Errorf("%s: no record at %s offset %d: %v", l.URL, filepath.Base(loc.File), loc.Offset, err)
		return
	}
	defer rec.Close()
	if off != loc.Offset {
		t.Errorf("%s: record at %d, logged %d", l.URL, off, loc.Offset)
	}
	h := rec.WarcHeader()
	if got := h.Get(gowarc.WarcTargetURI); got != l.URL {
		t.Errorf("%s: the record at %s:%d is of %s", l.URL, filepath.Base(loc.File), loc.Offset, got)
	}
	if l.Outcome == crawllog.OutcomeFailed {
		return // a failure's record is its metadata: no payload
	}
	if l.Revisit != "" {
		// A revisit's digest is its earlier capture's, and it holds no
		// payload of its own.
		if rec.Type() != gowarc.Revisit || h.Get(gowarc.WarcPayloadDigest) != l.Digest || !strings.HasSuffix(h.Get(gowarc.WarcProfile), l.Revisit) {
			t.Errorf("%s: a %s record (%s, %s) at %d, want a %s revisit of digest %s", l.URL, rec.Type(), h.Get(gowarc.WarcProfile), h.Get(gowarc.WarcPayloadDigest), loc.Offset, l.Revisit, l.Digest)
		}
		return
	}
	if rec.Type() != gowarc.Response {
		t.Errorf("%s: a %s record at %d, want a response", l.URL, rec.Type(), loc.Offset)
		return
	}
	if got := h.Get(gowarc.WarcPayloadDigest); got != l.Digest {
		t.Errorf("%s: WARC-Payload-Digest %s, logged %s", l.URL, got, l.Digest)
	}
	raw, err := rec.Block().RawBytes()
	if err != nil {
		t.Fatal(err)
	}
	block, err := io.ReadAll(raw)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := bytes.Cut(block, []byte("\r\n\r\n"))
	if d := page.PayloadDigest(body); d != l.Digest || int64(len(body)) != l.Size {
		t.Errorf("%s: the record's payload has %d bytes and digest %s, logged %d and %s", l.URL, len(body), d, l.Size, l.Digest)
	}
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
		if code != 0 {
			t.Fatalf("starter urls --state done: exit %d: %s", code, errb.String())
		}
		var page struct {
			URLs []string `json:"urls"`
			Next string   `json:"next"`
		}
		if err := json.Unmarshal(out.Bytes(), &page); err != nil {
			t.Fatalf("starter urls --json: %v\n%s", err, out.String())
		}
		got := map[string]bool{}
		for _, u := range page.URLs {
			got[u] = true
		}
		if len(want) == 0 || !maps.Equal(got, want) || len(page.URLs) != len(got) || page.Next != "" {
			t.Errorf("starter urls %s --host %s --state done listed %d URLs (%d distinct, next %q); the crawl log has %d pages of the host",
				id, host, len(page.URLs), len(got), page.Next, len(want))
		}
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
	if code := app().Run(ctx, []string{"report", id, "--json"}); code != 0 {
		t.Fatalf("starter report: exit %d: %s", code, errb.String())
	}
	var rv cli.ReportView
	if err := json.Unmarshal(out.Bytes(), &rv); err != nil {
		t.Fatalf("starter report --json: %v\n%s", err, out.String())
	}
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
	if tot.Attempts != int64(len(lines)) || tot.Pages != pages || tot.Failed != fails || tot.Robots != robots || tot.Bytes != nbytes || tot.Dropped != dropped {
		t.Errorf("report totals %+v; the log has %d lines of fetches, %d pages, %d failed, %d robots.txt, %d bytes, %d dropped", tot, len(lines), pages, fails, robots, nbytes, dropped)
	}
	if rv.Status == nil || rv.Status.PagesFetched != fetched || rv.Status.PagesFailed != failed || !rv.Agrees {
		t.Errorf("report's status %+v (agrees %v); the campaign's result: %d fetched, %d failed", rv.Status, rv.Agrees, fetched, failed)
	}
	if tot.Pages != fetched || tot.Failed != failed {
		t.Errorf("the log has %d pages and %d failed, the campaign counted %d and %d", tot.Pages, tot.Failed, fetched, failed)
	}
	out.Reset()
	if code := app().Run(ctx, []string{"report", id, "--top", "4"}); code != 0 {
		t.Fatalf("starter report: exit %d: %s", code, errb.String())
	}
	t.Logf("starter report %s --top 4:\n%s", id, out.String())
	for name, rows := range map[string][]crawllog.Row{"host": rv.ByHost, "MIME type": rv.ByMIME, "status": rv.ByStatus, "seed": rv.BySeed} {
		var sum crawllog.Totals
		for _, r := range rows {
			sum.Attempts += r.Attempts
			sum.Pages += r.Pages
			sum.Bytes += r.Bytes
			sum.Dropped += r.Dropped
		}
		if sum != (crawllog.Totals{Attempts: tot.Attempts, Pages: tot.Pages, Bytes: tot.Bytes, Dropped: tot.Dropped}) {
			t.Errorf("by %s: %d attempts, %d pages, %d bytes in all; total %+v", name, sum.Attempts, sum.Pages, sum.Bytes, tot)
		}
	}
}

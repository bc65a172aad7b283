package systest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/crawllog"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// identicalProfile is the WARC-Profile of an identical-payload-digest
// revisit.
const identicalProfile = "http://netpreserve.org/warc/1.1/revisit/" + page.RevisitIdenticalDigest

// TestDedupByDigest: a campaign started with dedup on a web where some
// pages are served at a second URL too (linked only from the page, so
// fetched after it) stores each second URL as a revisit of its page's
// capture, in WARC, Kafka and the crawl log, never as a second copy; the
// server still saw every URL once. A second run --from the first keeps
// it: a second URL answered 304 refers to its page's capture of run 1,
// and one whose page changed to the capture its page made in run 2. Every
// revisit of both runs resolves to a response record whose payload is the
// page's bytes.
func TestDedupByDigest(t *testing.T) {
	testenv.Long(t)
	testenv.NeedsPostgres(t)
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 60, CrossHost: true, NoExtras: true,
		Validators: true, Duplicates: 45, Base: 171})
	second := web.SecondURLs()
	s := startStack(t)
	run1 := newRecrawlRun(t, s, web, "")
	run1.cfg.Dedup = true
	st1 := runCampaign(t, s.temporal.Client(), run1.cfg, 5*time.Minute)()
	checkFetchedOnce(t, web)
	recs1 := readWARCRecords(t, run1.warc)
	checkDedupRecords(t, web, second, recs1, nil, identicalProfile)
	checkDedupRecords(t, web, second, readWARCRecords(t, run1.captures), nil, identicalProfile)
	checkDedupLines(t, second, crawllog.Dir(run1.cfg.CrawlLog, st1.Frontier))
	checkDedupKafka(t, s, run1.cfg.ID, second)

	changed := web.Change(0.1)
	web.Reset()
	run2 := newRecrawlRun(t, s, web, run1.cfg.ID)
	run2.cfg.Dedup = true
	runCampaign(t, s.temporal.Client(), run2.cfg, 5*time.Minute)()
	checkFetchedOnce(t, web)
	checkConditional(t, web, web.Pages(), changed)
	isChanged := map[string]bool{}
	for _, u := range changed {
		isChanged[u] = true
	}
	recs2 := readWARCRecords(t, run2.warc)
	for _, r := range recs2 {
		orig, dup := second[r.uri]
		switch {
		case dup && isChanged[orig] && r.profile != identicalProfile:
			assert.Failf(t, "second URL of a changed page not a revisit", "run 2: %s (its page changed, fetched after the page) is a %s record %q, want an identical-payload-digest revisit", r.uri, r.typ, r.profile)
		case r.typ == "revisit" && !dup && isChanged[r.uri]:
			assert.Failf(t, "changed page a revisit", "run 2: %s changed but is a revisit", r.uri)
		}
	}
	checkDedupRecords(t, web, second, recs2, recs1, "")
}

// checkDedupRecords: in recs every second URL is a revisit referring to
// its page (of profile, unless empty), every other page a response
// (unless earlier holds run 1's records: then a revisit may refer there),
// and every revisit resolves, in recs or earlier, to a response record
// whose payload has its digest and is the URL's bytes.
func checkDedupRecords(t *testing.T, web *testweb.Web, second map[string]string, recs, earlier []warcRecord, profile string) {
	t.Helper()
	byCapture := map[string]warcRecord{}
	for _, r := range append(append([]warcRecord(nil), earlier...), recs...) {
		if r.typ == "response" {
			byCapture[r.uri+" "+r.date] = r
		}
	}
	revisits := 0
	for _, r := range recs {
		orig, dup := second[r.uri]
		switch {
		case dup && (r.typ != "revisit" || r.refersURI != orig || (profile != "" && r.profile != profile)):
			assert.Failf(t, "second URL not a revisit of its page", "%s: a %s record %q refers to %q; want a revisit of %s", r.uri, r.typ, r.profile, r.refersURI, orig)
		case !dup && earlier == nil && r.typ != "response":
			assert.Failf(t, "page not a response", "%s: a %s record, want its response", r.uri, r.typ)
		}
		if r.typ != "revisit" {
			continue
		}
		revisits++
		target, ok := byCapture[r.refersURI+" "+r.refersDate]
		body, _ := web.Body(r.uri)
		if !ok || target.digest != r.digest || page.PayloadDigest(target.payload) != r.digest || string(target.payload) != string(body) {
			assert.Failf(t, "revisit does not resolve to its page's bytes", "revisit of %s refers to %s at %s: found %v, its payload the URL's bytes: %v", r.uri, r.refersURI, r.refersDate, ok, string(target.payload) == string(body))
		}
	}
	t.Logf("%d records, %d revisits, %d second URLs", len(recs), revisits, len(second))
	if earlier == nil {
		assert.Equal(t, len(second), revisits, "%d revisit records, want one per second URL (%d)", revisits, len(second))
	}
}

// checkDedupLines: the crawl log's line of each second URL is an
// identical-payload-digest revisit with its page's digest, and no other
// line is a revisit.
func checkDedupLines(t *testing.T, second map[string]string, dir string) {
	t.Helper()
	digests := map[string]string{}
	var dups []crawllog.Line
	_, _, err := crawllog.ReadDir(dir, func(l crawllog.Line) {
		if _, dup := second[l.URL]; dup {
			dups = append(dups, l)
		} else {
			assert.Empty(t, l.Revisit, "%s: a %s revisit line; only second URLs are", l.URL, l.Revisit)
		}
		digests[l.URL] = l.Digest
	})
	require.NoError(t, err)
	for _, l := range dups {
		if l.Revisit != page.RevisitIdenticalDigest || l.Digest == "" || l.Digest != digests[second[l.URL]] {
			assert.Failf(t, "second URL's line not a revisit with its page's digest", "%s: line revisit %q digest %q; its page's digest %q", l.URL, l.Revisit, l.Digest, digests[second[l.URL]])
		}
	}
	assert.Equal(t, len(second), len(dups), "%d lines of second URLs, want %d", len(dups), len(second))
}

// checkDedupKafka: the Kafka record of each second URL of campaign id is
// a revisit, with no value, referring to its page.
func checkDedupKafka(t *testing.T, s *stack, id string, second map[string]string) {
	t.Helper()
	seen := 0
	for _, m := range readTopic(t, s.kafka.Addr(), s.topic, 0) {
		h := map[string]string{}
		for _, kv := range m.Headers {
			h[kv.Key] = string(kv.Value)
		}
		orig, dup := second[string(m.Key)]
		if h["campaign"] != id || !dup {
			continue
		}
		seen++
		if len(m.Value) != 0 || h["revisit-profile"] != page.RevisitIdenticalDigest || h["refers-to-uri"] != orig {
			assert.Failf(t, "kafka: second URL's record not a revisit of its page", "kafka: %s: %d bytes, revisit %q refers to %q; want a revisit of %s", m.Key, len(m.Value), h["revisit-profile"], h["refers-to-uri"], orig)
		}
	}
	assert.Equal(t, len(second), seen, "kafka: %d records of second URLs, want %d", seen, len(second))
}

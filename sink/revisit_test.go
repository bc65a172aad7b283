package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nlnwa/gowarc"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/drover-crawl/drover/page"
)

// revisitOf is a later fetch of capture c's URL, at at, that found c
// unchanged, as the fetcher records it: a 304 to a conditional request
// (page.RevisitNotModified), or a 200 whose body had c's digest
// (page.RevisitIdenticalDigest); no body either way.
func revisitOf(c *page.Page, profile string, at time.Time) *page.Page {
	u, _ := url.Parse(c.URL)
	p := &page.Page{
		URL: c.URL, Campaign: c.Campaign, FetchedAt: at, Depth: c.Depth, Parent: c.Parent, IP: c.IP,
		Status: 304, StatusLine: "HTTP/1.1 304 Not Modified",
		Header:  []byte("Date: Sun, 06 Dec 2026 08:00:00 GMT\r\nETag: \"v1\"\r\n"),
		Request: []byte("GET " + u.RequestURI() + " HTTP/1.1\r\nHost: " + u.Host + "\r\nIf-None-Match: \"v1\"\r\n\r\n"),
		Revisit: &page.Revisit{Profile: profile, RefersToURI: c.URL, RefersToDate: c.FetchedAt, Digest: page.PayloadDigest(c.Body)},
	}
	if profile == page.RevisitIdenticalDigest {
		p.Status, p.StatusLine, p.Header = 200, "HTTP/1.1 200 OK", c.Header
		p.Request = c.Request
	}
	return p
}

// revisitCrawl is a capture, then a recrawl that revisits it under both
// profiles, and an identical-digest revisit of it found at another URL.
func revisitCrawl(t testing.TB) (capture *page.Page, revisits []*page.Page) {
	capture = testPages(t, 1)[0]
	capture.FetchedAt = time.Date(2026, 12, 6, 7, 0, 0, 123456789, time.UTC)
	later := capture.FetchedAt.Add(24 * time.Hour)
	copied := revisitOf(capture, page.RevisitIdenticalDigest, later.Add(2*time.Second))
	copied.URL, copied.Request = "http://mirror.test/copy-of-page-0", nil
	// The fetcher read this body to compare its digest: a sink stores it
	// nowhere all the same.
	copied.Body = capture.Body
	return capture, []*page.Page{
		revisitOf(capture, page.RevisitNotModified, later),
		revisitOf(capture, page.RevisitIdenticalDigest, later.Add(time.Second)),
		copied,
	}
}

// A recrawl's revisits are revisit records (WARC 1.1, 6.7) in place of
// responses: the profile's URI, the earlier capture named by its
// WARC-Target-URI and WARC-Date, its payload digest, and a block of this
// fetch's status line and header alone, said to be truncated when that
// block is a 200's (WARC 1.1, 6.7.2). Each resolves to the capture's
// response record in the file, by gowarc and by warcio.
func TestWARCStoresRevisits(t *testing.T) {
	dir := t.TempDir()
	w, err := NewWARC(WARCConfig{Dir: dir, Campaign: "camp-1"})
	require.NoError(t, err)
	capture, revisits := revisitCrawl(t)
	storeAll(t, w, []*page.Page{capture})
	storeAll(t, w, revisits)
	require.NoError(t, w.Close())

	files, recs := readWARCs(t, dir)
	ids := map[string]warcRec{}
	for _, r := range recs {
		ids[r.id] = r
	}
	want := map[string]*page.Page{} // by URL and WARC-Date
	for _, p := range revisits {
		want[p.URL+" "+warcDate(p.FetchedAt)] = p
	}
	seen := 0
	for _, r := range recs {
		if r.typ != "revisit" {
			continue
		}
		seen++
		h := r.header
		p := want[r.uri+" "+h.Get(gowarc.WarcDate)]
		require.NotNil(t, p, "revisit of unknown URL %q", r.uri)
		require.Equal(t, "http://netpreserve.org/warc/1.1/revisit/"+p.Revisit.Profile, h.Get(gowarc.WarcProfile), r.uri)
		require.Equal(t, capture.URL, h.Get(gowarc.WarcRefersToTargetURI), r.uri)
		require.Equal(t, "2026-12-06T07:00:00.123456789Z", h.Get(gowarc.WarcRefersToDate), r.uri)
		require.Equal(t, b32sha1(capture.Body), h.Get(gowarc.WarcPayloadDigest), r.uri)
		require.Equal(t, "application/http;msgtype=response", h.Get(gowarc.ContentType), r.uri)
		truncated := map[string]string{page.RevisitNotModified: "", page.RevisitIdenticalDigest: "length"}
		require.Equal(t, truncated[p.Revisit.Profile], h.Get(gowarc.WarcTruncated), "WARC-Truncated of %s", r.uri)
		require.Equal(t, p.StatusLine+"\r\n"+string(p.Header)+"\r\n", string(r.block), "block of %s", r.uri)
		require.Equal(t, b32sha1(r.block), h.Get(gowarc.WarcBlockDigest), r.uri)
		if p.Request != nil {
			require.Equal(t, "request", ids[r.concurrentTo].typ, "revisit of %s not linked to its request", r.uri)
		}
		orig := resolveRevisit(t, recs, r)
		head := capture.StatusLine + "\r\n" + string(capture.Header) + "\r\n"
		require.Equal(t, head+string(capture.Body), string(orig.block), "the capture %s refers to", r.uri)
	}
	require.Equal(t, len(revisits), seen, "revisit records")
	for _, r := range recs {
		if r.typ == "metadata" && want[r.uri+" "+r.header.Get(gowarc.WarcDate)] != nil {
			require.Equal(t, "revisit", ids[r.concurrentTo].typ, "metadata of %s not linked to its revisit", r.uri)
		}
	}

	t.Run("warcio", func(t *testing.T) {
		warcioIndex(t, files, recs)
		warcioResolvesRevisits(t, files, len(revisits))
	})
}

// resolveRevisit returns the one response record that revisit refers to:
// WARC-Target-URI, WARC-Date and WARC-Payload-Digest equal to the
// revisit's WARC-Refers-To-Target-URI, WARC-Refers-To-Date and
// WARC-Payload-Digest, as pywb looks it up.
func resolveRevisit(t *testing.T, recs []warcRec, revisit warcRec) warcRec {
	t.Helper()
	rh := revisit.header
	var found []warcRec
	for _, r := range recs {
		h := r.header
		if r.typ == "response" && r.uri == rh.Get(gowarc.WarcRefersToTargetURI) && h.Get(gowarc.WarcDate) == rh.Get(gowarc.WarcRefersToDate) &&
			h.Get(gowarc.WarcPayloadDigest) == rh.Get(gowarc.WarcPayloadDigest) {
			found = append(found, r)
		}
	}
	require.Len(t, found, 1, "responses the revisit of %s refers to", revisit.uri)
	return found[0]
}

// warcioResolvesRevisits reads the files with warcio (JavaScript), a
// reader independent of gowarc, and checks that it reads n revisit
// records, each with its status line's code, that each names a response
// of the files by target URI, date and payload digest.
func warcioResolvesRevisits(t *testing.T, files []string, n int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	node, cli := warcioCLI(ctx, t)
	fields := []string{"warc-type", "warc-target-uri", "warc-date", "warc-payload-digest", "warc-profile",
		"warc-refers-to-target-uri", "warc-refers-to-date", "http:status"}
	args := append(append([]string{cli, "index"}, files...), "-f", strings.Join(fields, ","))
	out, err := exec.CommandContext(ctx, node, args...).Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		require.FailNow(t, fmt.Sprintf("warcio index: %v\n%s", err, exit.Stderr))
	}
	require.NoError(t, err, "warcio index")
	var recs []map[string]any
	for line := range bytes.Lines(bytes.TrimSpace(out)) {
		var e map[string]any
		require.NoError(t, json.Unmarshal(line, &e), "warcio line %q", line)
		recs = append(recs, e)
	}
	revisits := 0
	for _, rv := range recs {
		if rv["warc-type"] != "revisit" {
			continue
		}
		revisits++
		status := map[string]float64{page.RevisitNotModified: 304, page.RevisitIdenticalDigest: 200}
		profile, _ := rv["warc-profile"].(string)
		require.Equal(t, status[profile[strings.LastIndex(profile, "/")+1:]], rv["http:status"], "warcio's status of %v", rv)
		matches := 0
		for _, r := range recs {
			if r["warc-type"] == "response" && r["warc-target-uri"] == rv["warc-refers-to-target-uri"] &&
				r["warc-date"] == rv["warc-refers-to-date"] && r["warc-payload-digest"] == rv["warc-payload-digest"] {
				matches++
			}
		}
		require.Equal(t, 1, matches, "responses warcio finds for %v", rv)
	}
	require.Equal(t, n, revisits, "revisits warcio read")
}

// A revisit is a small Kafka record: the page's key and headers, the
// revisit's four, and an empty value that is not null (a compacted topic
// would read null as a tombstone deleting the capture), even when the
// fetcher still held the body it compared.
func TestKafkaStoresRevisits(t *testing.T) {
	c := startKafka(t, kfake.SeedTopics(2, "pages"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	k, err := NewKafka(ctx, KafkaConfig{Brokers: c.ListenAddrs(), Topic: "pages", BodyCap: testBodyCap})
	require.NoError(t, err)
	capture, revisits := revisitCrawl(t)
	pages := append([]*page.Page{capture}, revisits...)
	storeAll(t, k, pages)
	require.NoError(t, k.Close())

	recs := readKafka(t, c.ListenAddrs(), "pages", len(pages))
	require.Len(t, recs, len(pages), "one record per page")
	want := map[string]*page.Page{} // by key and fetched-at
	for _, p := range pages {
		want[p.URL+" "+p.FetchedAt.Format(time.RFC3339Nano)] = p
	}
	for _, r := range recs {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		p := want[string(r.Key)+" "+h["fetched-at"]]
		require.NotNil(t, p, "unexpected record %q at %s", r.Key, h["fetched-at"])
		if p.Revisit == nil {
			require.Equal(t, string(p.Body), string(r.Value), "the capture's body")
			require.Equal(t, "", h["revisit-profile"]+h["refers-to-uri"]+h["refers-to-date"]+h["payload-digest"], "revisit headers on the capture")
			continue
		}
		require.True(t, r.Value != nil && len(r.Value) == 0, "value of the revisit of %s: %d bytes, null %v", p.URL, len(r.Value), r.Value == nil)
		require.Equal(t, map[string]string{
			"url": p.URL, "status": strconv.Itoa(p.Status), "content-type": "", "content-encoding": "",
			"fetched-at": p.FetchedAt.Format(time.RFC3339Nano), "campaign": p.Campaign, "depth": strconv.Itoa(p.Depth),
			"parent": p.Parent, "ip": p.IP, "truncated": "false", "status-line": p.StatusLine, "http-headers": string(p.Header),
			"revisit-profile": p.Revisit.Profile, "refers-to-uri": capture.URL,
			"refers-to-date": "2026-12-06T07:00:00.123456789Z", "payload-digest": b32sha1(capture.Body),
		}, h, "headers of the revisit of "+p.URL)
	}
}

// pgOldTable is the table as drover created it before revisits: no
// revisit_profile, refers_to_url, refers_to_date nor payload_digest.
const pgOldTable = `CREATE TABLE %s (
	id bigserial PRIMARY KEY,
	campaign text NOT NULL,
	url text NOT NULL,
	status integer NOT NULL,
	status_line text NOT NULL,
	headers bytea,
	body bytea,
	content_type text NOT NULL,
	content_encoding text NOT NULL,
	truncated boolean NOT NULL,
	fetched_at timestamptz NOT NULL,
	depth integer NOT NULL,
	parent text NOT NULL,
	ip text NOT NULL,
	error text NOT NULL
)`

// A table created by an older drover passes Check, which leaves it as it
// is, and gets the revisit columns when the sink opens it, its rows NULL
// in them. Then a capture's row has the
// digest of its body, a failure's none, and a revisit's row no body and
// the profile, URL, time and digest of the capture, on which it joins
// that capture's row.
func TestPostgresStoresRevisitsInAnOlderTable(t *testing.T) {
	table := testTable(t)
	tn := pgx.Identifier{table}.Sanitize()
	pgExec(t, fmt.Sprintf(pgOldTable, tn))
	pgExec(t, `INSERT INTO `+tn+` (campaign, url, status, status_line, content_type, content_encoding, truncated, fetched_at, depth, parent, ip, error)
		VALUES ('camp-0', 'http://old.test/', 200, 'HTTP/1.1 200 OK', '', '', false, '2020-01-02 03:04:05.678901+00', 0, '', '', '')`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, Check(ctx, testPostgresURI+"&table="+table, Options{}), "checking the older table")
	var n int
	withConn(t, func(ctx context.Context, conn *pgx.Conn) {
		require.NoError(t, conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns WHERE table_name = $1`, table).Scan(&n))
	})
	require.Equal(t, 15, n, "columns after Check, which writes nothing")
	s := newTestPostgres(t, table)
	capture, revisits := revisitCrawl(t)
	failed := testPages(t, 6)[5] // Status 0, Err set
	storeAll(t, s, append([]*page.Page{capture, failed}, revisits...))
	require.NoError(t, s.Close())

	withConn(t, func(ctx context.Context, conn *pgx.Conn) {
		rows, err := conn.Query(ctx, `SELECT column_name, data_type FROM information_schema.columns
			WHERE table_name = $1 AND column_name IN ('revisit_profile', 'refers_to_url', 'refers_to_date', 'payload_digest') ORDER BY column_name`, table)
		require.NoError(t, err)
		cols, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
			var name, typ string
			err := r.Scan(&name, &typ)
			return name + " " + typ, err
		})
		require.NoError(t, err)
		require.Equal(t, []string{"payload_digest text", "refers_to_date timestamp with time zone", "refers_to_url text", "revisit_profile text"}, cols)

		// Each row as url, fetched_at, revisit_profile, refers_to_url,
		// refers_to_date, payload_digest, body ("-" for NULL).
		rows, err = conn.Query(ctx, `SELECT concat_ws(' ', url, to_char(fetched_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'),
			coalesce(revisit_profile, '-'), coalesce(refers_to_url, '-'),
			coalesce(to_char(refers_to_date AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US'), '-'),
			coalesce(payload_digest, '-'), coalesce(encode(body, 'escape'), '-')) FROM `+tn)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		us := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000") }
		want := []string{
			"http://old.test/ 2020-01-02T03:04:05.678901 - - - - -",
			strings.Join([]string{capture.URL, us(capture.FetchedAt), "- - -", b32sha1(capture.Body), string(capture.Body)}, " "),
			strings.Join([]string{failed.URL, us(failed.FetchedAt), "- - - - -"}, " "),
		}
		for _, r := range revisits {
			want = append(want, strings.Join([]string{r.URL, us(r.FetchedAt), r.Revisit.Profile, capture.URL, us(capture.FetchedAt), b32sha1(capture.Body), "-"}, " "))
		}
		slices.Sort(got)
		slices.Sort(want)
		require.Equal(t, want, got, "rows")

		// A consumer joins a revisit to its capture on the three columns.
		var joined []int64
		rows, err = conn.Query(ctx, `SELECT c.id FROM `+tn+` r JOIN `+tn+` c ON c.url = r.refers_to_url
			AND c.fetched_at = r.refers_to_date AND c.payload_digest = r.payload_digest WHERE r.revisit_profile IS NOT NULL`)
		require.NoError(t, err)
		joined, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		require.NoError(t, err)
		var captureID int64
		require.NoError(t, conn.QueryRow(ctx, `SELECT id FROM `+tn+` WHERE url = $1 AND revisit_profile IS NULL`, capture.URL).Scan(&captureID))
		require.Equal(t, []int64{captureID, captureID, captureID}, joined, "captures joined to the revisits")
	})
}

// A sink opening a table that has every column does not alter it: ALTER
// TABLE would wait for a consumer's long read of the table, holding back
// every worker's writes meanwhile. A transaction here holds the lock such
// a read holds while a second sink opens the table.
func TestPostgresOpensATableBeingRead(t *testing.T) {
	table := testTable(t)
	require.NoError(t, newTestPostgres(t, table).Close())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testPostgresURI)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(context.Background()) }()
	_, err = tx.Exec(ctx, `LOCK TABLE `+pgx.Identifier{table}.Sanitize()+` IN ACCESS SHARE MODE`)
	require.NoError(t, err)

	octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
	defer ocancel()
	s, err := NewPostgres(octx, PostgresConfig{URI: testPostgresURI, Table: table})
	require.NoError(t, err, "opening the table while it is read")
	require.NoError(t, s.Store(octx, testPages(t, 1)[0]), "storing while it is read")
	require.NoError(t, s.Close())
}

// The memory sink keeps a copy of a revisit's reference, as of the rest
// of the page: a caller reusing the page changes nothing stored.
func TestMemoryCopiesRevisit(t *testing.T) {
	m := NewMemory()
	_, revisits := revisitCrawl(t)
	p := revisits[0]
	want := *p.Revisit
	require.NoError(t, m.Store(context.Background(), p))
	p.Revisit.Digest, p.Revisit.RefersToURI = "sha1:CHANGED", "http://changed.test/"
	require.Equal(t, want, *m.Pages()[0].Revisit)
}

// warc:DIR?records=captures writes each page's response or revisit record
// alone: no request and no metadata record, a failure's metadata record
// excepted (its only one). The revisits still resolve to their capture,
// by gowarc and by warcio, and cost less than half the bytes of full
// records.
func TestWARCCapturesOnly(t *testing.T) {
	sizes := map[string]int64{}
	for _, records := range []string{"full", "captures"} {
		dir := t.TempDir()
		s, err := Open(context.Background(), "warc:"+dir+"?records="+records, Options{Campaign: "camp-1"})
		require.NoError(t, err)
		capture, revisits := revisitCrawl(t)
		failed := &page.Page{URL: "http://127.0.0.1:9/gone", Campaign: "camp-1", FetchedAt: capture.FetchedAt, Err: "dial tcp: connection refused"}
		storeAll(t, s, []*page.Page{capture, failed})
		before := dirBytes(t, dir)
		storeAll(t, s, revisits)
		require.NoError(t, s.Close())
		sizes[records] = dirBytes(t, dir) - before

		files, recs := readWARCs(t, dir)
		types := map[string]int{}
		for _, r := range recs {
			types[r.typ]++
		}
		if records == "full" {
			require.Equal(t, map[string]int{"warcinfo": 1, "request": 3, "response": 1, "revisit": 3, "metadata": 5}, types, "records of %s", records)
			continue
		}
		require.Equal(t, map[string]int{"warcinfo": 1, "response": 1, "revisit": 3, "metadata": 1}, types, "records of %s", records)
		for _, r := range recs {
			if r.typ == "revisit" {
				resolveRevisit(t, recs, r)
			}
			if r.typ == "metadata" {
				require.Equal(t, failed.URL, r.uri, "the one metadata record")
			}
		}
		t.Run("warcio", func(t *testing.T) {
			warcioIndex(t, files, recs)
			warcioResolvesRevisits(t, files, len(revisits))
		})
	}
	t.Logf("three revisits: %d bytes with full records, %d with captures", sizes["full"], sizes["captures"])
	require.Less(t, 2*sizes["captures"], sizes["full"], "captures should cost less than half of full records")
}

// dirBytes is the size of the WARC files in dir.
func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.warc.gz"))
	require.NoError(t, err)
	var n int64
	for _, f := range files {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		n += fi.Size()
	}
	return n
}

// A campaign may store into two WARC sinks at once (full records and
// captures, as the recrawl test does): Multi stores them concurrently,
// and both set the page's WARC location (race detector).
func TestTwoWARCSinksStoreOnePage(t *testing.T) {
	full, captures := t.TempDir(), t.TempDir()
	s, err := OpenAll(context.Background(), []string{"warc:" + full, "warc:" + captures + "?records=captures"}, Options{Campaign: "camp-1"})
	require.NoError(t, err)
	pages := testPages(t, 8)
	storeAll(t, s, pages)
	require.NoError(t, s.Close())
	fetched := 0
	for _, p := range pages {
		if p.Status != 0 {
			fetched++
			require.NotNil(t, p.WARC, "the WARC location of %s", p.URL)
		}
	}
	require.NotZero(t, fetched, "pages with a response")
	for _, dir := range []string{full, captures} {
		_, recs := readWARCs(t, dir)
		responses := 0
		for _, r := range recs {
			if r.typ == "response" {
				responses++
			}
		}
		require.Equal(t, fetched, responses, "responses in %s", dir)
	}
}

package sink

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/drover-crawl/drover/page"
)

// pointerPages are a page whose spooled body is over a 64 KiB max_body,
// one whose spooled body is under it, and an ordinary one, stored by a
// Multi of the sink under test and a WARC sink in warcDir.
func pointerPages(t *testing.T, uris []string) (over, under, small *page.Page) {
	t.Helper()
	pages := testPages(t, 3)
	over, under, small = pages[0], pages[1], pages[2]
	over.Body = bigBody(3 << 20)
	spooled(t, over, t.TempDir())
	under.Body = bigBody(40 << 10)
	spooled(t, under, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := OpenAll(ctx, uris, Options{Campaign: "camp-1"})
	require.NoError(t, err)
	storeAll(t, s, pages)
	require.NoError(t, s.Close())
	return over, under, small
}

// TestKafkaPointerAboveMaxBody: a body over the Kafka sink's max_body is
// a record with no value, flagged too large, with the whole body's size
// and digest and the WARC record that holds it; bodies under it are in
// the value, a spooled one too.
func TestKafkaPointerAboveMaxBody(t *testing.T) {
	c := startKafka(t, kfake.SeedTopics(1, "pages"))
	warcDir := t.TempDir()
	over, under, small := pointerPages(t, []string{
		"warc:" + warcDir,
		fmt.Sprintf("kafka://%s/pages?max_body=65536", c.ListenAddrs()[0]),
	})
	overBody := readAllBody(t, over)
	recs := readKafka(t, c.ListenAddrs(), "pages", 3)
	require.Len(t, recs, 3, "one record per page")
	for _, r := range recs {
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		switch string(r.Key) {
		case over.URL:
			require.Equal(t, 0, len(r.Value), "value of the too-large body")
			require.Equal(t, BodyTooLarge, h["body-omitted"])
			require.Equal(t, strconv.Itoa(len(overBody)), h["body-size"])
			require.Equal(t, b32sha1(overBody), h["payload-digest"])
			require.Equal(t, "false", h["truncated"])
			off, err := strconv.ParseInt(h["warc-offset"], 10, 64)
			require.NoError(t, err, "warc-offset %q", h["warc-offset"])
			requireRecordAt(t, filepath.Join(warcDir, h["warc-filename"]), off, over.URL)
		case under.URL, small.URL:
			p := under
			if string(r.Key) == small.URL {
				p = small
			}
			body := readAllBody(t, p)
			require.True(t, string(body) == string(r.Value), "value of %s (%d bytes, want %d)", p.URL, len(r.Value), len(body))
			require.Equal(t, "", h["body-omitted"]+h["warc-filename"], "pointer headers on %s", p.URL)
		default:
			require.FailNow(t, fmt.Sprintf("unexpected key %q", r.Key))
		}
	}

	// Without a WARC sink: the same record, naming no WARC file.
	c2 := startKafka(t, kfake.SeedTopics(1, "pages"))
	over, _, _ = pointerPages(t, []string{fmt.Sprintf("kafka://%s/pages?max_body=65536", c2.ListenAddrs()[0])})
	for _, r := range readKafka(t, c2.ListenAddrs(), "pages", 3) {
		if string(r.Key) != over.URL {
			continue
		}
		h := map[string]string{}
		for _, kv := range r.Headers {
			h[kv.Key] = string(kv.Value)
		}
		require.Equal(t, BodyTooLarge, h["body-omitted"])
		require.Equal(t, b32sha1(overBody), h["payload-digest"])
		require.Equal(t, "", h["warc-filename"], "no WARC sink, no WARC file")
	}
}

// TestPostgresPointerAboveMaxBody: as TestKafkaPointerAboveMaxBody, for a
// row.
func TestPostgresPointerAboveMaxBody(t *testing.T) {
	table := testTable(t)
	warcDir := t.TempDir()
	over, under, small := pointerPages(t, []string{"warc:" + warcDir, testPostgresURI + "&max_body=65536&table=" + table})
	overBody := readAllBody(t, over)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testPostgresURI)
	require.NoError(t, err)
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT url, body, body_size, body_omitted, payload_digest, warc_filename, warc_offset FROM `+pgx.Identifier{table}.Sanitize())
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var (
			url                   string
			body                  []byte
			size, offset          *int64
			omitted, digest, file *string
		)
		require.NoError(t, rows.Scan(&url, &body, &size, &omitted, &digest, &file, &offset))
		n++
		switch url {
		case over.URL:
			require.True(t, body == nil, "body of the too-large row: %d bytes", len(body))
			require.True(t, omitted != nil && *omitted == BodyTooLarge, "body_omitted")
			require.True(t, size != nil && *size == int64(len(overBody)), "body_size")
			require.True(t, digest != nil && *digest == b32sha1(overBody), "payload_digest")
			require.True(t, file != nil && offset != nil, "warc_filename, warc_offset")
			requireRecordAt(t, filepath.Join(warcDir, *file), *offset, over.URL)
		case under.URL, small.URL:
			p := under
			if url == small.URL {
				p = small
			}
			want := readAllBody(t, p)
			require.True(t, string(want) == string(body), "body of %s (%d bytes, want %d)", url, len(body), len(want))
			require.True(t, omitted == nil && file == nil, "pointer columns on %s", url)
			require.True(t, size != nil && *size == int64(len(want)), "body_size of %s", url)
		default:
			require.FailNow(t, fmt.Sprintf("unexpected row %q", url))
		}
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 3, n, "rows")
}

// readAllBody reads p's body, spooled or not.
func readAllBody(t *testing.T, p *page.Page) []byte {
	t.Helper()
	if p.BodyFile == nil {
		return p.Body
	}
	b := make([]byte, p.BodySize())
	_, err := p.BodyFile.ReadAt(b, 0)
	require.NoError(t, err)
	return b
}

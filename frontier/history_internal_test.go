package frontier

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A history reads back as it was written: the capture, and the links (in
// URL order) of a page with a validator.
func TestHistoryRoundTrip(t *testing.T) {
	c := &page.Capture{Status: 200, ETag: `"e1"`, LastModified: "Thu, 01 Jan 2026 00:00:00 GMT",
		Digest: "sha1:AAAA", Date: time.Date(2026, 1, 2, 3, 4, 5, 678, time.UTC), URI: "http://h.example/p/1.html"}
	links := []urlrule.Link{
		{URL: "http://h.example/p/2.html"},
		{URL: "http://h.example/p/10.html", Score: 0.5},
		{URL: "http://h.example/assets/a.png", Embeds: 1},
		{URL: "http://other.example/", Hops: 2, Embeds: 3},
	}
	rs := revisitState{Interval: 90 * time.Minute, Due: time.Date(2026, 1, 2, 5, 0, 0, 1, time.UTC), Fetched: time.Date(2026, 1, 2, 3, 30, 0, 0, time.UTC)}
	b := encodeHistory(c, links, rs)
	d, err := decodeHistory(b, true)
	require.NoError(t, err)
	got, gotLinks := d.capture, d.links
	assert.Equal(t, *c, *got, "capture")
	assert.Equal(t, rs, d.revisit, "revisit state")
	want := slices.Clone(links)
	slices.SortFunc(want, func(x, y urlrule.Link) int { return strings.Compare(x.URL, y.URL) })
	assert.Equal(t, want, gotLinks, "links")
	// Without a validator no 304 can come: the links are not kept.
	c.ETag, c.LastModified = "", ""
	nv, err := decodeHistory(encodeHistory(c, links, revisitState{}), true)
	if assert.NoError(t, err, "links kept without a validator") {
		assert.Empty(t, nv.links, "links kept without a validator")
	}
}

// A history written before the revisit state (version 1) reads as it was,
// with none.
func TestHistoryVersion1(t *testing.T) {
	b := []byte{historyVersionV1}
	b = binary.AppendUvarint(b, 200)
	b = binary.AppendVarint(b, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixNano())
	for _, s := range []string{`"e1"`, "", "sha1:AAAA"} {
		b = appendString(b, s)
	}
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendUvarint(b, 0)
	b = appendString(b, "http://h.example/")
	b = append(b, 0)
	d, err := decodeHistory(b, true)
	require.NoError(t, err)
	assert.Equal(t, `"e1"`, d.capture.ETag, "version 1 read as %+v, links %+v", *d.capture, d.links)
	assert.Equal(t, "sha1:AAAA", d.capture.Digest, "version 1 read as %+v, links %+v", *d.capture, d.links)
	assert.Equal(t, 200, d.capture.Status, "version 1 read as %+v, links %+v", *d.capture, d.links)
	if assert.Len(t, d.links, 1, "version 1 read as %+v, links %+v", *d.capture, d.links) {
		assert.Equal(t, "http://h.example/", d.links[0].URL, "version 1 read as %+v, links %+v", *d.capture, d.links)
	}
	assert.Equal(t, revisitState{}, d.revisit, "version 1 has a revisit state")
}

// A history written before the capture URI (version 2) reads as it was,
// the URL's own capture.
func TestHistoryVersion2(t *testing.T) {
	b := []byte{historyVersionV2}
	b = binary.AppendUvarint(b, 200)
	b = binary.AppendVarint(b, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC).UnixNano())
	for _, s := range []string{"", "Thu, 01 Jan 2026 00:00:00 GMT", "sha1:AAAA"} {
		b = appendString(b, s)
	}
	rs := revisitState{Interval: time.Hour, Due: time.Date(2026, 1, 2, 1, 0, 0, 0, time.UTC), Fetched: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	for _, v := range []int64{int64(rs.Interval), rs.Due.UnixNano(), rs.Fetched.UnixNano()} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, 1)
	b = binary.AppendUvarint(b, 0)
	b = appendString(b, "http://h.example/")
	b = append(b, 0)
	d, err := decodeHistory(b, true)
	require.NoError(t, err)
	assert.Empty(t, d.capture.URI, "version 2 read as %+v, revisit %+v, links %+v", *d.capture, d.revisit, d.links)
	assert.NotEmpty(t, d.capture.LastModified, "version 2 read as %+v, revisit %+v, links %+v", *d.capture, d.revisit, d.links)
	assert.Equal(t, "sha1:AAAA", d.capture.Digest, "version 2 read as %+v, revisit %+v, links %+v", *d.capture, d.revisit, d.links)
	assert.Equal(t, rs, d.revisit, "version 2 read as %+v, revisit %+v, links %+v", *d.capture, d.revisit, d.links)
	if assert.Len(t, d.links, 1, "version 2 read as %+v, revisit %+v, links %+v", *d.capture, d.revisit, d.links) {
		assert.Equal(t, "http://h.example/", d.links[0].URL, "version 2 read as %+v, revisit %+v, links %+v", *d.capture, d.revisit, d.links)
	}
}

// Front coding keeps a site's links small: 40 links of one host cost
// well under their URLs' length.
func TestHistoryLinksAreFrontCoded(t *testing.T) {
	var links []urlrule.Link
	total := 0
	for i := range 40 {
		l := urlrule.Link{URL: fmt.Sprintf("http://127.10.0.1:41234/p/%d.html", i*37)}
		links = append(links, l)
		total += len(l.URL)
	}
	b := encodeHistory(&page.Capture{Status: 200, ETag: `"x"`, Digest: "sha1:" + strings.Repeat("A", 32)}, links, revisitState{})
	assert.LessOrEqual(t, len(b), total/2, "history of 40 links is %d bytes; the URLs are %d", len(b), total)
	t.Logf("40 links of %d bytes: a history of %d bytes (%.1f bytes per link)", total, len(b), float64(len(b)-50)/40)
}

// Every truncation and every flipped byte of a history decodes to an
// error or to some history, never a panic.
func TestHistoryHostileBytes(t *testing.T) {
	c := &page.Capture{Status: 200, ETag: `"e"`, Digest: "sha1:D", Date: time.Unix(1, 0)}
	b := encodeHistory(c, []urlrule.Link{{URL: "http://a/x"}, {URL: "http://a/y", Score: 2, Hops: 1, Embeds: 1}},
		revisitState{Interval: time.Hour, Due: time.Unix(7200, 0), Fetched: time.Unix(3600, 0)})
	for n := range len(b) {
		_, err := decodeHistory(b[:n], true)
		assert.Error(t, err, "a history cut at %d of %d bytes decoded", n, len(b))
	}
	for i := range b {
		for _, v := range []byte{0, 0x7f, 0x80, 0xff} {
			bad := slices.Clone(b)
			bad[i] = v
			_, _ = decodeHistory(bad, true)
		}
	}
}

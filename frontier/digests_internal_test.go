package frontier

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/page"
)

// A digest index entry reads back as the capture it names, under the
// digest asked, and is never read as a URL's history.
func TestDigestEntryRoundTrip(t *testing.T) {
	c := &page.Capture{Status: 200, ETag: `"e"`, Digest: "sha1:AAAA", Date: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}
	b := encodeDigestEntry(c, "http://h.example/p/1.html")
	got, err := decodeDigestEntry(b, "sha1:AAAA")
	require.NoError(t, err)
	assert.Equal(t, page.Capture{Status: 200, Digest: "sha1:AAAA", Date: c.Date, URI: "http://h.example/p/1.html"}, *got)
	_, err = decodeHistory(b, true)
	assert.Error(t, err, "a digest entry read as a history")
	_, err = decodeDigestEntry(encodeHistory(c, nil, revisitState{}), "sha1:AAAA")
	assert.Error(t, err, "a history read as a digest entry")
	for n := range len(b) {
		_, err := decodeDigestEntry(b[:n], "sha1:AAAA")
		assert.Error(t, err, "cut at %d", n)
	}
}

// Only a 2xx stored whole under its own URL, in a campaign that
// deduplicates, goes into the index.
func TestIndexedCapture(t *testing.T) {
	full := &page.Capture{Status: 200, Digest: "sha1:AAAA"}
	dedup := &campaign.Config{Dedup: true}
	assert.Equal(t, full, indexedCapture(dedup, full, ""))
	for name, c := range map[string]struct {
		cfg       *campaign.Config
		c         *page.Capture
		unchanged string
	}{
		"no dedup":      {&campaign.Config{}, full, ""},
		"no capture":    {dedup, nil, ""},
		"a revisit":     {dedup, full, page.RevisitNotModified},
		"another's":     {dedup, &page.Capture{Status: 200, Digest: "sha1:AAAA", URI: "http://h.example/"}, ""},
		"a 404":         {dedup, &page.Capture{Status: 404, Digest: "sha1:AAAA"}, ""},
		"without a sum": {dedup, &page.Capture{Status: 200}, ""},
	} {
		assert.Nil(t, indexedCapture(c.cfg, c.c, c.unchanged), name)
	}
}

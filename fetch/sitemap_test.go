package fetch

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSitemapLocs(t *testing.T) {
	base, _ := url.Parse("http://example.com/sitemap.xml")
	cases := []struct {
		name, ct, body string
		sitemap        bool
		want           []string
	}{
		{"urlset", "application/xml", `<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <url><loc>http://Example.com/a#x</loc><lastmod>2026-01-01</lastmod></url>
  <url><loc> /b?utm_source=x&amp;k=1 </loc></url>
  <url><loc>javascript:alert(1)</loc></url>
</urlset>`, true, []string{"http://example.com/a", "http://example.com/b?k=1"}},
		{"index", "text/xml; charset=utf-8", `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
<sitemap><loc>http://example.com/s1.xml</loc></sitemap></sitemapindex>`, true, []string{"http://example.com/s1.xml"}},
		{"broken xml keeps what came before", "application/xml", `<urlset><url><loc>http://example.com/ok</loc></url><url><loc>http://exa`, true, []string{"http://example.com/ok"}},
		{"html is not a sitemap", "text/html", `<urlset><loc>http://example.com/x</loc></urlset>`, false, nil},
		{"xml that is no sitemap", "application/xml", `<rss><channel/></rss>`, false, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			require.Equal(t, c.sitemap, isSitemap(c.ct, []byte(c.body)), "isSitemap")
			if !c.sitemap {
				return
			}
			var got []string
			for _, e := range sitemapLocs([]byte(c.body), base, []string{"utm_source"}) {
				got = append(got, e.loc)
			}
			assert.Truef(t, slices.Equal(got, c.want), "locs = %q, want %q", got, c.want)
		})
	}
}

// A <lastmod> in any W3C datetime form goes with its <loc>, whichever
// comes first; one that is not a date is none.
func TestSitemapLastmod(t *testing.T) {
	base, _ := url.Parse("http://example.com/sitemap.xml")
	body := `<urlset>
<url><loc>http://example.com/a</loc><lastmod>2026-01-05</lastmod></url>
<url><lastmod>2026-01-05T10:30:00+01:00</lastmod><loc>http://example.com/b</loc></url>
<url><loc>http://example.com/c</loc><lastmod>2026-01-05T10:30Z</lastmod></url>
<url><loc>http://example.com/d</loc><lastmod>yesterday</lastmod></url>
<url><loc>http://example.com/e</loc></url>
</urlset>`
	want := map[string]time.Time{
		"http://example.com/a": time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC),
		"http://example.com/b": time.Date(2026, 1, 5, 9, 30, 0, 0, time.UTC),
		"http://example.com/c": time.Date(2026, 1, 5, 10, 30, 0, 0, time.UTC),
		"http://example.com/d": {},
		"http://example.com/e": {},
	}
	got := sitemapLocs([]byte(body), base, nil)
	require.Len(t, got, len(want), "sitemap entries")
	for _, e := range got {
		if w, ok := want[e.loc]; !ok || !e.lastmod.Equal(w) {
			assert.Fail(t, fmt.Sprintf("%s: lastmod %v, want %v", e.loc, e.lastmod, w))
		}
	}
}

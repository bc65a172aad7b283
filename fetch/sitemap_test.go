package fetch

import (
	"net/url"
	"slices"
	"testing"
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
			if got := isSitemap(c.ct, []byte(c.body)); got != c.sitemap {
				t.Fatalf("isSitemap = %v, want %v", got, c.sitemap)
			}
			if !c.sitemap {
				return
			}
			if got := sitemapLocs([]byte(c.body), base, []string{"utm_source"}); !slices.Equal(got, c.want) {
				t.Errorf("locs = %q, want %q", got, c.want)
			}
		})
	}
}

package urlrule

import (
	"net/url"
	"testing"

	"github.com/drover-crawl/drover/internal/cpubench"
	"github.com/stretchr/testify/require"
)

// benchLinks are hrefs of the kinds pages carry, resolved against
// benchBase: relative, dot segments, absolute, with queries, fragments,
// escapes and default ports, a few off-site.
var benchLinks = []string{
	"/section/article-7.html",
	"../other/page9?ref=nav&utm_source=bench#top",
	"https://WWW.Example.com:443/tag/%7Etopic-3/",
	"https://cdn.partner.example/assets/item/11/./view",
	"p/17.html",
	"./p/23.html",
	"../p/42.html#section-3",
	"http://host7.example:8080/p/99.html",
	"/search?q=a+b&page=2",
	"  /with/spaces%20and%zz\n",
}

const benchBase = "https://www.example.com/section/article-123.html"

// BenchmarkNormalize normalizes one link of benchLinks per iteration,
// resolved against a page URL, dropping one query parameter.
func BenchmarkNormalize(b *testing.B) {
	base, _ := url.Parse(benchBase)
	drop := []string{"utm_source"}
	b.ReportAllocs()
	i := 0
	stop := cpubench.Start(b)
	for b.Loop() {
		if _, err := Normalize(benchLinks[i%len(benchLinks)], base, drop); err != nil {
			require.NoError(b, err) // inside the if: testify's Helper call stays out of the timed loop
		}
		i++
	}
	stop()
}

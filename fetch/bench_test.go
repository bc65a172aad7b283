package fetch

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/internal/cpubench"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// benchPage is an 8 KB HTML page with 40 links of the usual kinds:
// relative, absolute, with queries and fragments, some off-site.
func benchPage() []byte {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Bench</title>
<link rel="canonical" href="https://www.example.com/section/article-123.html">
<link rel="stylesheet" href="/static/site.css"><meta name="viewport" content="width=device-width"></head><body>
<header><nav><ul>`)
	for i := range 39 {
		var href string
		switch i % 4 {
		case 0:
			href = fmt.Sprintf("/section/article-%d.html", i)
		case 1:
			href = fmt.Sprintf("../other/page%d?ref=nav&amp;utm_source=bench#top", i)
		case 2:
			href = fmt.Sprintf("https://WWW.Example.com:443/tag/%%7Etopic-%d/", i)
		default:
			href = fmt.Sprintf("https://cdn.partner.example/assets/item/%d/./view", i)
		}
		fmt.Fprintf(&b, "<li class=\"nav-item\"><a class=\"link\" href=\"%s\" title=\"Item %d\">Item number %d</a></li>\n", href, i, i)
		if i%8 == 7 {
			b.WriteString("</ul><p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris.</p><ul>\n")
		}
	}
	b.WriteString("</ul></nav></header><main>")
	for b.Len() < 8000 {
		b.WriteString("<p>Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur.</p>\n")
	}
	b.WriteString("</main></body></html>")
	return []byte(b.String())
}

// BenchmarkExtractLinks measures link extraction and normalization of one
// page (tokenizer, Normalize of every link, dedup).
func BenchmarkExtractLinks(b *testing.B) {
	page := benchPage()
	base, _ := url.Parse("https://www.example.com/section/article-123.html")
	drop := []string{"utm_source"}
	urls, _, _, _ := extractLinks(page, base, drop, true)
	require.Len(b, urls, 40, "links extracted")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	b.ResetTimer()
	stop := cpubench.Start(b)
	for b.Loop() {
		extractLinks(page, base, drop, true)
	}
	stop()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
}

// BenchmarkExtractLinksTestWeb extracts and normalizes the links of the
// test web's own pages (8 KB, 40 links, 10 of them navigation), one page
// per iteration, all pages in turn.
func BenchmarkExtractLinksTestWeb(b *testing.B) {
	web := webtest.Start(b, testweb.Config{Hosts: 2, PagesPerHost: 200, CrossHost: true, Base: 99})
	type page struct {
		body []byte
		base *url.URL
	}
	var pages []page
	var size int64
	for _, u := range web.Pages() {
		body, ok := web.Body(u)
		if !ok || !bytes.Contains(body, []byte("<html")) {
			continue
		}
		base, _ := url.Parse(u)
		pages = append(pages, page{body, base})
		size += int64(len(body))
	}
	b.SetBytes(size / int64(len(pages)))
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	stop := cpubench.Start(b)
	for b.Loop() {
		p := pages[i%len(pages)]
		extractLinks(p.body, p.base, nil, true)
		i++
	}
	stop()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
}

// BenchmarkExtract is the worker's whole link path for one test web page
// per iteration: decode, extraction, normalization and the scope check of
// every link, with the campaign the dev stack runs (scope: the seeds'
// hosts).
func BenchmarkExtract(b *testing.B) {
	web := webtest.Start(b, testweb.Config{Hosts: 2, PagesPerHost: 200, CrossHost: true, Base: 98})
	f, err := New(campaign.Config{ID: "bench", Seeds: web.Seeds(), AllowPrivate: true}.WithDefaults())
	require.NoError(b, err)
	defer f.Close()
	type pg struct {
		body []byte
		base *url.URL
	}
	var pages []pg
	for _, u := range web.Pages() {
		if body, ok := web.Body(u); ok && bytes.Contains(body, []byte("<html")) {
			base, _ := url.Parse(u)
			pages = append(pages, pg{body, base})
		}
	}
	b.ReportAllocs()
	i, links := 0, 0
	stop := cpubench.Start(b)
	for b.Loop() {
		p := pages[i%len(pages)]
		res := Result{Page: &page.Page{Body: p.body, ContentType: "text/html; charset=utf-8"}}
		f.extract(&res, Request{URL: p.base.String(), Depth: 1}, p.base, http.Header{}, p.body)
		links += len(res.Links)
		i++
	}
	stop()
	require.NotZero(b, links, "no links in scope")
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
}

// largePage is a ~100 KB page shaped like a real one: most of its bytes
// are script, style and text, with about 300 links of the usual kinds,
// and scripts whose strings hold markup ("<a href", "</div>") that is no
// tag.
func largePage() []byte {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>Large &amp; realistic</title>\n")
	b.WriteString(`<link rel="canonical" href="https://www.example.com/news/story-42.html"><link rel="alternate" hreflang="de" href="/de/news/story-42.html">` + "\n")
	b.WriteString(`<meta name="viewport" content="width=device-width, initial-scale=1"><meta name="robots" content="index, follow">` + "\n")
	for s := range 6 {
		fmt.Fprintf(&b, "<script type=\"text/javascript\">\n// bundle %d\n(function(w, d) {\n", s)
		for i := range 40 {
			fmt.Fprintf(&b, "  var el%d = d.createElement('div'); el%d.innerHTML = '<a href=\"/js/%d/%d\">more</a></div>';\n", i, i, s, i)
			fmt.Fprintf(&b, "  if (w.innerWidth < %d && el%d.children.length > 0) { w.dataLayer.push({event: 'view', id: %d}); }\n", 300+i, i, i)
		}
		b.WriteString("})(window, document);\n</script>\n")
		fmt.Fprintf(&b, "<style>\n/* theme %d */\n", s)
		for i := range 25 {
			fmt.Fprintf(&b, ".c%d-%d > a[href^=\"http\"]:hover { color: #%06x; margin: %dpx 0 0 %dpx; }\n", s, i, s*4099+i*97, i, s)
		}
		b.WriteString("</style>\n<!-- analytics: <a href=\"/commented-out\"> -->\n")
	}
	b.WriteString("</head>\n<body class=\"article\">\n<div id=\"page\"><div class=\"wrap\"><header><nav><ul>\n")
	for i := range 300 {
		var href string
		switch i % 6 {
		case 0:
			href = fmt.Sprintf("/news/story-%d.html", i)
		case 1:
			href = fmt.Sprintf("../section/page%d?ref=nav&amp;utm_source=bench#top", i)
		case 2:
			href = fmt.Sprintf("https://www.example.com/tag/topic-%d/", i)
		case 3:
			href = fmt.Sprintf("https://cdn.partner.example/item/%d/view", i)
		case 4:
			href = fmt.Sprintf("//static.example.net/img/%d.jpg", i)
		default:
			href = fmt.Sprintf("story-%d.html", i)
		}
		if i%10 == 9 {
			fmt.Fprintf(&b, "<div class=\"teaser\"><p>Paragraph %d: Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua &mdash; ut enim ad minim veniam, quis nostrud exercitation.</p>\n", i)
			fmt.Fprintf(&b, "<p>Duis aute irure dolor in <b>reprehenderit</b> in voluptate velit esse cillum dolore eu fugiat nulla pariatur. <a href='%s' rel=\"nofollow\">Excepteur</a> sint occaecat.</p></div>\n", href)
			continue
		}
		fmt.Fprintf(&b, "<li class=\"item\"><a class=\"link\" href=\"%s\" title=\"Item %d\" data-track=\"nav-%d\">Item number %d</a></li>\n", href, i, i, i)
		if i%50 == 49 {
			b.WriteString("</ul></nav><div class=\"body\"><div class=\"col\"><p>Text, text and more text: the body of an article runs on for a while before the next list of links begins.</p></div></div><nav><ul>\n")
		}
	}
	b.WriteString("</ul></nav></header><main>\n")
	for b.Len() < 100<<10 {
		b.WriteString("<div class=\"para\"><p>Sed ut perspiciatis unde omnis iste natus error sit voluptatem accusantium doloremque laudantium, totam rem aperiam, eaque ipsa quae ab illo inventore veritatis et quasi architecto beatae vitae dicta sunt explicabo.</p></div>\n")
	}
	b.WriteString("<iframe src=\"/embed/video\" width=\"560\" height=\"315\"></iframe>\n</main></div></div></body></html>\n")
	return []byte(b.String())
}

// BenchmarkLinkTagsScan compares linkTags (scanLinkTags, then the
// tokenizer on the kept tags only) with the whole page through the
// tokenizer, on the test web's pages (8 KB) and on largePage (100 KB),
// one page per iteration.
func BenchmarkLinkTagsScan(b *testing.B) {
	web := webtest.Start(b, testweb.Config{Hosts: 2, PagesPerHost: 200, CrossHost: true, Base: 96})
	var testWeb [][]byte
	for _, u := range web.Pages() {
		if body, ok := web.Body(u); ok && bytes.Contains(body, []byte("<html")) {
			testWeb = append(testWeb, body)
		}
	}
	for _, set := range []struct {
		name  string
		pages [][]byte
	}{{"testweb", testWeb}, {"large", [][]byte{largePage()}}} {
		var size int64
		for _, p := range set.pages {
			size += int64(len(p))
		}
		for _, c := range []struct {
			name string
			read func([]byte) []tag
		}{{"tokenizer", tokenizerLinkTags}, {"scanner", linkTags}} {
			b.Run(set.name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(size / int64(len(set.pages)))
				b.ReportAllocs()
				i := 0
				stop := cpubench.Start(b)
				for b.Loop() {
					if len(c.read(set.pages[i%len(set.pages)])) == 0 {
						require.FailNow(b, "no tags")
					}
					i++
				}
				stop()
				b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
			})
		}
	}
}

// BenchmarkExtractLinksLargePage measures link extraction and
// normalization of largePage (100 KB, about 300 links).
func BenchmarkExtractLinksLargePage(b *testing.B) {
	page := largePage()
	base, _ := url.Parse("https://www.example.com/news/story-42.html")
	urls, _, _, _ := extractLinks(page, base, nil, true)
	require.GreaterOrEqual(b, len(urls), 250, "links extracted, want about 300")
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	stop := cpubench.Start(b)
	for b.Loop() {
		extractLinks(page, base, nil, true)
	}
	stop()
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
}

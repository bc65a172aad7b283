package fetch

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

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
	urls, _, _ := extractLinks(page, base, drop)
	if len(urls) != 40 {
		b.Fatalf("%d links, want 40", len(urls))
	}
	b.SetBytes(int64(len(page)))
	b.ReportAllocs()
	b.ResetTimer()
	stop := cpubench.Start(b)
	for b.Loop() {
		extractLinks(page, base, drop)
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
		extractLinks(p.body, p.base, nil)
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
	if err != nil {
		b.Fatal(err)
	}
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
		f.extract(&res, Request{URL: p.base.String(), Depth: 1}, p.base, http.Header{})
		links += len(res.Links)
		i++
	}
	stop()
	if links == 0 {
		b.Fatal("no links in scope")
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
}

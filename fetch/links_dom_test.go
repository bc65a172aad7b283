package fetch

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/andybalholm/cascadia"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/drover-crawl/drover/internal/cpubench"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// goquery is the reference for link extraction: it builds the tree a
// browser's parser builds. The crawl reads tags with the tokenizer instead
// (linkTags: a tenth of the allocations, 3-4x less time); these tests hold
// the two to the same tags, and the benchmark measures both.

var selLinkTags = cascadia.MustCompile("base, meta, a, area, frame, iframe, link, img, source, script, style, video, audio, track, embed, object, [style]")

// domTags is linkTags by goquery's tree (the extraction before the tokenizer's),
// with the attributes linkTags keeps; ok is false when the parser gives up.
func domTags(body []byte) (tags []tag, ok bool) {
	doc, err := goquery.NewDocumentFromReader(bytes.NewReader(body))
	if err != nil {
		return nil, false
	}
	doc.FindMatcher(selLinkTags).Each(func(_ int, s *goquery.Selection) {
		n := s.Get(0)
		t := tag{}
		if slices.Contains(refTagNames, n.Data) {
			t.name = n.Data
		}
		for _, a := range n.Attr {
			if an := linkAttrName([]byte(a.Key)); an != "" && (t.name != "" || an == "style") {
				t.attrs = append(t.attrs, a)
			}
		}
		if t.name == "style" && n.FirstChild != nil && n.FirstChild.Type == html.TextNode {
			t.attrs = append(t.attrs, html.Attribute{Key: cssText, Val: n.FirstChild.Data})
		}
		tags = append(tags, t)
	})
	return tags, true
}

// describe renders tags with the first value of each attribute read, for
// comparison and for a readable diff.
func describe(tags []tag) []string {
	out := make([]string, len(tags))
	for i, t := range tags {
		var b strings.Builder
		b.WriteString(t.name)
		for _, k := range []string{"href", "src", "rel", "name", "content", "http-equiv", "srcset", "data", "poster", "style", cssText} {
			if v, ok := t.attr(k); ok {
				fmt.Fprintf(&b, " %s=%q", k, v)
			}
		}
		out[i] = b.String()
	}
	return out
}

// linkDocs are documents whose markup the two readings could disagree on.
var linkDocs = []string{
	testPage,
	`<html><body><a href="/ok">ok</a><div><p><table><tr><td><a href="/x"`,
	`<a href=/unquoted>u</a><a href='/single'>s</a><a href="/unterminated>t</a>`,
	`<<<<>>>><a <a href="/nested">n</a></a></b></i></body></html></html>`,
	`<html><head><base href="javascript:evil()"><base href="/second/"></head><a href="x">x</a>`,
	`<script>document.write('<a href="/in-script">')</script><!-- <a href="/in-comment"> --><a href="/real">r</a>`,
	`<style>a[href="/in-style"]{}</style><title><a href="/in-title"></title><textarea><a href="/in-textarea"></textarea><a href="/after">`,
	`<noscript><a href="/in-noscript"></noscript><xmp><a href="/in-xmp"></xmp><noembed><a href="/in-noembed"></noembed><a href="/after">`,
	`<iframe src="/frame"><a href="/in-iframe"></iframe><a href="/after">`,
	`<A HREF="/UPPER" REL="NoFollow">x</A><a href="/1" href="/2">dup</a><AREA href=/area>`,
	`<svg><a href="/svg-a"><text>t</text></a></svg><math><mi><a href="/math-a">m</a></mi></math>`,
	`<template><a href="/in-template">t</a></template><select><option><a href="/in-select">s</a></option></select>`,
	`<head><meta name="robots" content="noindex, nofollow"><meta http-equiv="Refresh" content="0; url=/next"><link rel="canonical alternate" href="/canon"></head>`,
	`<a href="/a&amp;b?x=1&y=2&lt;">entities</a><a href="/caf&eacute;">named</a><a href=&quot;/q&quot;>q</a>`,
	`<!-- unclosed comment <a href="/never">`,
	"<a href=\"/caf\xe9\">latin-1</a>\x00<a href=\"/after-nul\">",
	`<plaintext><a href="/in-plaintext">`,
}

func TestLinkTagsAgreeWithGoquery(t *testing.T) {
	docs := append([]string(nil), linkDocs...)
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 50, CrossHost: true, Calendar: true, Base: 98})
	for _, u := range append(web.Pages(), web.Seeds()...) {
		if body, ok := web.Body(u); ok {
			docs = append(docs, string(body))
		}
	}
	compared := 0
	for i, doc := range docs {
		want, ok := domTags([]byte(doc))
		require.Truef(t, ok, "document %d: goquery failed to parse it", i)
		got := linkTags([]byte(doc))
		assert.Equal(t, describe(want), describe(got), fmt.Sprint("document ", i, ": ", firstN(doc, 80)))
		compared++
	}
	assert.True(t, compared > 100, fmt.Sprint("compared ", compared, " documents"))
}

// Where the tokenizer and the tree differ, on purpose: a tag the parser
// drops for its place (a <frame> outside a <frameset>) is still a URL the
// page names, so the tokenizer keeps it.
func TestLinkTagsKeepsTagsOutOfPlace(t *testing.T) {
	doc := []byte(`<body><frame src="/stray-frame"><a href="/a">a</a></body>`)
	dom, ok := domTags(doc)
	require.True(t, ok, "goquery parses it")
	assert.Equal(t, []string{`a href="/a"`}, describe(dom), "goquery drops the stray frame")
	assert.Equal(t, []string{`frame src="/stray-frame"`, `a href="/a"`}, describe(linkTags(doc)))
}

func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// BenchmarkLinkTags compares the two readings of the tags of the test
// web's pages (8 KB, 40 links): goquery's tree against the tokenizer.
func BenchmarkLinkTags(b *testing.B) {
	web := webtest.Start(b, testweb.Config{Hosts: 2, PagesPerHost: 200, CrossHost: true, Base: 97})
	var pages [][]byte
	var size int64
	for _, u := range web.Pages() {
		if body, ok := web.Body(u); ok && bytes.Contains(body, []byte("<html")) {
			pages = append(pages, body)
			size += int64(len(body))
		}
	}
	for _, c := range []struct {
		name string
		read func([]byte) int
	}{
		{"goquery", func(p []byte) int { t, _ := domTags(p); return len(t) }},
		{"tokenizer", func(p []byte) int { return len(linkTags(p)) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(size / int64(len(pages)))
			b.ReportAllocs()
			i := 0
			stop := cpubench.Start(b)
			for b.Loop() {
				if c.read(pages[i%len(pages)]) == 0 {
					require.FailNow(b, "no tags")
				}
				i++
			}
			stop()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/page")
		})
	}
}

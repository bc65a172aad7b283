package fetch

import (
	"bytes"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"golang.org/x/net/html"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/urlrule"
)

// maxLinksPerPage bounds the links one page can hand the frontier; a
// 1 MiB body of "<a href=x>" could otherwise yield about 100,000.
const maxLinksPerPage = 10000

// extract decodes a 2xx page's body (body: the page's, or a spooled
// body's first bytes) and fills res.Links, NoIndex and NoFollow. The
// stored body is left as it was sent.
func (f *Fetcher) extract(res *Result, req Request, pageURL *url.URL, h http.Header, body []byte) {
	page := res.Page
	xNoIndex, xNoFollow := xRobotsTag(h.Values("X-Robots-Tag"))
	res.NoIndex, res.NoFollow = xNoIndex, xNoFollow
	decoded, truncated, err := decodeBody(body, page.ContentEncoding, f.parseLimit())
	if truncated && f.cfg.BodyCap > 0 && page.BodyFile == nil {
		// The decoded form hit the campaign's cap. Without a cap, or
		// for a spooled body (parsed from its first bytes), the limit
		// is only of what is parsed: the stored body is whole.
		page.Truncated = true
	}
	if err != nil {
		return
	}
	if f.cfg.Sitemaps && isSitemap(page.ContentType, decoded) {
		// A sitemap's URLs (or an index's sitemaps) are links one level
		// down, in scope like any other.
		for _, s := range sitemapLocs(decoded, pageURL, f.cfg.DropParams) {
			if u, err := url.Parse(s); err == nil {
				if l := (urlrule.Link{URL: s}); f.inScope(u, l.Depth(req.Depth), pageURL) {
					res.Links = append(res.Links, l)
				}
			}
		}
		return
	}
	if f.cfg.EmbedLimit() >= 0 && isCSS(page.ContentType, pageURL) {
		f.addEmbeds(res, req, pageURL, cssEmbeds(decoded, pageURL, f.cfg.DropParams))
		return
	}
	if !isHTML(page.ContentType, decoded) {
		return
	}
	urls, embeds, noIndex, noFollow := extractLinks(decoded, pageURL, f.cfg.DropParams, f.cfg.EmbedLimit() >= 0)
	res.NoIndex = res.NoIndex || noIndex
	res.NoFollow = res.NoFollow || noFollow
	// Embeds first: a URL a page both shows and links to is its asset.
	f.addEmbeds(res, req, pageURL, embeds)
	if res.NoFollow {
		return
	}
	self := pageURL.String()
	for _, s := range urls {
		if s == self {
			continue
		}
		// s is in Normalize's form: the scope reads it without a second
		// parse.
		if l := (urlrule.Link{URL: s}); f.inScopeNormal(s, l.Depth(req.Depth), pageURL) {
			if res.Links == nil {
				res.Links = make([]urlrule.Link, 0, len(urls))
			}
			res.Links = append(res.Links, l)
		}
	}
}

// addEmbeds adds a page's embeds to res.Links: those in scope, and those
// out of it while the embeds in a row that lead to them are within the
// campaign's EmbedLimit.
func (f *Fetcher) addEmbeds(res *Result, req Request, pageURL *url.URL, embeds []string) {
	if len(embeds) == 0 {
		return
	}
	self := pageURL.String()
	hops := req.Embeds + 1
	for _, s := range embeds {
		if s == self {
			continue
		}
		l := urlrule.Link{URL: s, Embeds: hops}
		if f.embedInScope(s, hops, l.Depth(req.Depth), pageURL) {
			if res.Links == nil {
				res.Links = make([]urlrule.Link, 0, len(embeds))
			}
			res.Links = append(res.Links, l)
		}
	}
}

// embedInScope is inScopeNormal for an embed found hops embeds in a row
// from a page in scope.
func (f *Fetcher) embedInScope(normal string, hops, depth int, parent *url.URL) bool {
	if f.inScopeNormal(normal, depth, parent) {
		return true
	}
	if hops > f.cfg.EmbedLimit() {
		return false
	}
	ok, _ := f.scope.AllowEmbedNormal(normal, depth, parent)
	return ok
}

// isHTML reports whether a body is HTML, by its Content-Type or, when
// there is none, by sniffing (http.DetectContentType).
func isHTML(contentType string, body []byte) bool {
	if strings.TrimSpace(contentType) == "" {
		contentType = http.DetectContentType(body)
	}
	mt := mediaType(contentType)
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// mediaType is a Content-Type's media type, lower case; a value
// mime.ParseMediaType refuses is cut at its first ';'.
func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(contentType), ";")
		mt = strings.TrimSpace(mt)
	}
	return mt
}

// extractLinks parses an HTML document (any bytes: the parser recovers from
// malformed markup and invalid UTF-8) and returns its links and its
// embeds, normalized, http(s) only, each once per list, in document order,
// at most maxLinksPerPage in all, resolved against the first base[href].
//
// Links, the pages it leads to: a[href], area[href], frame[src],
// iframe[src], link[href] with rel canonical or alternate, and a meta
// refresh target; a and area with rel=nofollow are skipped. A meta robots
// (or meta name="drover") "noindex", "nofollow" or "none" sets noIndex and
// noFollow; with noFollow no link is returned.
//
// Embeds, what the page needs to render (only when withEmbeds):
// img[src, srcset], source[src, srcset], script[src], link[href] with rel
// stylesheet, icon or preload, video[src, poster], audio[src],
// track[src], embed[src], object[data], and the url()s and @imports of
// style elements and style attributes (cssURLs). noFollow leaves them:
// it is about the pages a page leads to, not the page itself.
//
// The document's charset is not converted: the bytes of a non-UTF-8 URL
// are percent-encoded as they are (browsers encode a query in the page's
// charset, so such links may differ from a browser's).
func extractLinks(body []byte, pageURL *url.URL, dropParams []string, withEmbeds bool) (urls, embeds []string, noIndex, noFollow bool) {
	tags := linkTags(body)
	base := baseURL(tags, pageURL)
	links := newURLSet(base, dropParams, len(tags))
	var refresh []string
	for _, t := range tags {
		if t.name != "meta" {
			continue
		}
		name := strings.ToLower(strings.TrimSpace(t.attrOr("name")))
		if name == "robots" || name == campaign.RobotsToken {
			ni, nf := robotsDirectives(t.attrOr("content"))
			noIndex, noFollow = noIndex || ni, noFollow || nf
		}
		if strings.EqualFold(strings.TrimSpace(t.attrOr("http-equiv")), "refresh") {
			if u := refreshURL(t.attrOr("content")); u != "" {
				refresh = append(refresh, u)
			}
		}
	}
	if withEmbeds {
		assets := newURLSet(base, dropParams, len(tags))
		for _, t := range tags {
			embedsOf(t, assets)
		}
		embeds = assets.urls
		links.budget -= len(embeds)
	}
	if noFollow {
		return nil, embeds, noIndex, true
	}
	for _, t := range tags {
		switch t.name {
		case "a", "area":
			if hasToken(t.attrOr("rel"), "nofollow") {
				continue
			}
			links.add(t.attrOr("href"))
		case "link":
			rel := t.attrOr("rel")
			if !isEmbedRel(rel) && (hasToken(rel, "canonical") || hasToken(rel, "alternate")) {
				links.add(t.attrOr("href"))
			}
		case "frame", "iframe":
			links.add(t.attrOr("src"))
		}
	}
	for _, u := range refresh {
		links.add(u)
	}
	return links.urls, embeds, noIndex, false
}

// baseURL is the first base[href] of tags that is an http(s) URL, or
// pageURL.
func baseURL(tags []tag, pageURL *url.URL) *url.URL {
	for _, t := range tags {
		if t.name != "base" {
			continue
		}
		if href, ok := t.attr("href"); ok {
			if b, err := pageURL.Parse(urlrule.TrimURL(href)); err == nil && (b.Scheme == "http" || b.Scheme == "https") {
				return b
			}
			break // the first base[href] only
		}
	}
	return pageURL
}

// urlSet gathers a page's URLs, normalized against base, each once, at
// most budget of them.
type urlSet struct {
	base       *url.URL
	dropParams []string
	seen       map[string]bool
	urls       []string
	budget     int
	sizeHint   int
}

func newURLSet(base *url.URL, dropParams []string, sizeHint int) *urlSet {
	return &urlSet{base: base, dropParams: dropParams, budget: maxLinksPerPage, sizeHint: sizeHint}
}

func (s *urlSet) add(raw string) {
	if len(s.urls) >= s.budget || raw == "" {
		return
	}
	n, err := urlrule.Normalize(raw, s.base, s.dropParams)
	if err != nil || s.seen[n] {
		return
	}
	if s.seen == nil {
		s.seen = make(map[string]bool, s.sizeHint)
		s.urls = make([]string, 0, min(s.sizeHint, maxLinksPerPage))
	}
	s.seen[n] = true
	s.urls = append(s.urls, n)
}

// tag is a start tag that link extraction reads.
type tag struct {
	name  string
	attrs []html.Attribute
	// first and last are the tag's span indices while linkTags reads.
	first, last int
}

// attr returns the value of the tag's first attribute named key.
func (t tag) attr(key string) (string, bool) {
	for _, a := range t.attrs {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func (t tag) attrOr(key string) string {
	v, _ := t.attr(key)
	return v
}

// linkTags returns the base, meta, a, area, frame, iframe and link tags of
// a document, in document order, with the attributes link extraction reads
// (linkAttrName).
//
// It finds the tags golang.org/x/net/html's tokenizer finds rather than
// building goquery's tree: the tokenizer skips comments and the
// text of script, style, textarea, title, noscript and the other raw-text
// elements as the parser does, so it finds the same tags (the differential
// test TestLinkTagsAgreeWithGoquery holds it to goquery on the test web and
// on hostile pages), has no nesting limit (the parser gives up past 512
// elements), and costs a fraction: BenchmarkLinkTags measured 3-4x less
// time and a tenth of the allocations per 8 KB page than the tree
// (bench/README.md). A page's tree is never needed for links: the links
// are the tags, whatever their parents.
//
// The tokenizer itself reads every byte of the page through a function
// call, and most of a real page is text, script and style; so
// scanLinkTags finds the kept tags' bytes first, with the tokenizer's
// rules, and only those go through a tokenizer, which parses their
// attributes as it would have in the page. The values of all kept
// attributes are gathered in one pooled buffer and become one string, so
// a page costs a few allocations of ours rather than one per attribute.
func linkTags(body []byte) []tag {
	sc := scratchPool.Get().(*tagScratch)
	defer sc.release()
	sc.at = scanLinkTags(body, sc.at)
	if len(sc.at) == 0 {
		return nil
	}
	for k := 0; k < len(sc.at); k += 2 {
		sc.raw = append(sc.raw, body[sc.at[k]:sc.at[k+1]]...)
	}
	sc.rd.Reset(sc.raw)
	z := html.NewTokenizer(&sc.rd)
	for {
		switch z.Next() {
		case html.ErrorToken:
			// io.EOF: the tokenizer never fails otherwise on a reader of bytes.
			return sc.finish()
		case html.StartTagToken, html.SelfClosingTagToken:
			// After an iframe's start tag the tokenizer would read what
			// follows as the iframe's raw text; here that is the next
			// kept tag, whose place in the page scanLinkTags already
			// judged. A style element's span holds its text.
			if !sc.add(z) {
				z.NextIsNotRawText()
			}
		case html.TextToken:
			sc.addText(z)
		}
	}
}

// tagScratch gathers a page's tags and their kept attributes: the values
// in vals, their keys and places in spans. While linkTags reads, at holds
// the kept tags' offsets in the page, raw their bytes, and rd reads raw.
type tagScratch struct {
	tags  []tag
	vals  []byte
	spans []attrSpan
	at    []int
	raw   []byte
	rd    bytes.Reader
}

// attrSpan is a kept attribute: its key, and where its value is in vals.
type attrSpan struct {
	key        string
	start, end int
}

var scratchPool = sync.Pool{New: func() any { return new(tagScratch) }}

// add appends the tokenizer's current start tag, with its kept
// attributes, if linkTagName keeps it or it has a style attribute (of
// another tag, only that one is kept); it reports whether the tag is a
// style element, whose text comes next. The tokenizer's TagName copies
// the name of every tag; add reads it from Raw instead and calls TagAttr
// only on the tags it keeps.
func (sc *tagScratch) add(z *html.Tokenizer) (style bool) {
	tn := linkTagName(z.Raw())
	t := tag{name: tn}
	first := len(sc.spans)
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		if an := linkAttrName(k); an != "" && (tn != "" || an == "style") {
			sc.spans = append(sc.spans, attrSpan{key: an, start: len(sc.vals), end: len(sc.vals) + len(v)})
			sc.vals = append(sc.vals, v...)
		}
	}
	if tn == "" && len(sc.spans) == first {
		// "style" was in the tag, but not as an attribute.
		return false
	}
	t.first, t.last = first, len(sc.spans)
	sc.tags = append(sc.tags, t)
	return tn == "style"
}

// addText keeps a style element's text, as its attribute cssText.
func (sc *tagScratch) addText(z *html.Tokenizer) {
	n := len(sc.tags)
	if n == 0 || sc.tags[n-1].name != "style" || sc.tags[n-1].last != len(sc.spans) {
		return
	}
	v := z.Text()
	sc.spans = append(sc.spans, attrSpan{key: cssText, start: len(sc.vals), end: len(sc.vals) + len(v)})
	sc.vals = append(sc.vals, v...)
	sc.tags[n-1].last = len(sc.spans)
}

// cssText is the key under which a style element's tag holds its text.
const cssText = "#text"

// finish returns a copy of the tags, each with its attributes, whose
// values share one string.
func (sc *tagScratch) finish() []tag {
	if len(sc.tags) == 0 {
		return nil
	}
	tags := slices.Clone(sc.tags)
	if len(sc.spans) == 0 {
		return tags
	}
	vals := string(sc.vals)
	attrs := make([]html.Attribute, len(sc.spans))
	for i, sp := range sc.spans {
		attrs[i] = html.Attribute{Key: sp.key, Val: vals[sp.start:sp.end]}
	}
	for i := range tags {
		t := &tags[i]
		if t.first < t.last {
			t.attrs = attrs[t.first:t.last:t.last]
		}
	}
	return tags
}

// release returns sc to the pool, unless a huge page made it huge.
func (sc *tagScratch) release() {
	if cap(sc.vals) > 64<<10 || cap(sc.spans) > 4096 || cap(sc.tags) > 4096 || cap(sc.at) > 8192 || cap(sc.raw) > 256<<10 {
		return
	}
	clear(sc.tags) // drops the attributes' references
	sc.tags, sc.vals, sc.spans = sc.tags[:0], sc.vals[:0], sc.spans[:0]
	sc.at, sc.raw = sc.at[:0], sc.raw[:0]
	scratchPool.Put(sc)
}

// linkTagName returns the interned name of a tag link extraction reads, or
// "" (no allocation either way), from the raw bytes of a start tag token.
// The name is what the tokenizer's TagName returns: the bytes after '<' up
// to white space, '/' or '>', ASCII lower-cased (a NUL in it, which
// TagName replaces, makes it none of these names).
func linkTagName(raw []byte) string {
	var buf [len("iframe")]byte
	n := 0
	for _, c := range raw[min(1, len(raw)):] {
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '/' || c == '>' {
			break
		}
		if n == len(buf) {
			return ""
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	switch string(buf[:n]) {
	case "a":
		return "a"
	case "area":
		return "area"
	case "base":
		return "base"
	case "meta":
		return "meta"
	case "link":
		return "link"
	case "frame":
		return "frame"
	case "iframe":
		return "iframe"
	case "img":
		return "img"
	case "source":
		return "source"
	case "script":
		return "script"
	case "style":
		return "style"
	case "video":
		return "video"
	case "audio":
		return "audio"
	case "track":
		return "track"
	case "embed":
		return "embed"
	case "object":
		return "object"
	}
	return ""
}

// linkAttrName returns the interned name of an attribute link extraction
// reads, or "".
func linkAttrName(b []byte) string {
	switch string(b) {
	case "href":
		return "href"
	case "src":
		return "src"
	case "rel":
		return "rel"
	case "name":
		return "name"
	case "content":
		return "content"
	case "http-equiv":
		return "http-equiv"
	case "srcset":
		return "srcset"
	case "data":
		return "data"
	case "poster":
		return "poster"
	case "style":
		return "style"
	}
	return ""
}

// hasToken reports whether the space-separated list has tok (ASCII
// case-insensitive), as for rel values.
func hasToken(list, tok string) bool {
	for t := range strings.FieldsSeq(list) {
		if strings.EqualFold(t, tok) {
			return true
		}
	}
	return false
}

// robotsDirectives reads a robots meta content or X-Robots-Tag value.
func robotsDirectives(v string) (noIndex, noFollow bool) {
	for _, d := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		switch strings.ToLower(d) {
		case "noindex":
			noIndex = true
		case "nofollow":
			noFollow = true
		case "none":
			noIndex, noFollow = true, true
		}
	}
	return noIndex, noFollow
}

// xRobotsTag reads X-Robots-Tag values; a value for another crawler
// ("otherbot: noindex") is ignored, one for drover or for all applies.
func xRobotsTag(values []string) (noIndex, noFollow bool) {
	for _, v := range values {
		if agent, rest, ok := strings.Cut(v, ":"); ok {
			a := strings.ToLower(strings.TrimSpace(agent))
			if !strings.ContainsAny(a, " ,") && !strings.HasPrefix(a, "unavailable_after") && !strings.HasPrefix(a, "max-") {
				if a != campaign.RobotsToken {
					continue
				}
				v = rest
			}
		}
		ni, nf := robotsDirectives(v)
		noIndex, noFollow = noIndex || ni, noFollow || nf
	}
	return noIndex, noFollow
}

// refreshURL extracts the URL of a meta refresh content ("5; url=/next",
// "0;URL='/next'"), "" when there is none.
func refreshURL(content string) string {
	_, rest, ok := strings.Cut(content, ";")
	if !ok {
		if _, rest, ok = strings.Cut(content, ","); !ok {
			return ""
		}
	}
	rest = strings.TrimSpace(rest)
	if len(rest) >= 3 && strings.EqualFold(rest[:3], "url") {
		r := strings.TrimSpace(rest[3:])
		if strings.HasPrefix(r, "=") {
			rest = strings.TrimSpace(r[1:])
		}
	}
	if len(rest) > 0 && (rest[0] == '\'' || rest[0] == '"') {
		q := rest[0]
		rest = rest[1:]
		if i := strings.IndexByte(rest, q); i >= 0 {
			rest = rest[:i]
		}
	}
	return strings.TrimSpace(rest)
}

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

// extract decodes a 2xx page's body and fills res.Links, NoIndex and
// NoFollow. The stored body is left as it was sent.
func (f *Fetcher) extract(res *Result, req Request, pageURL *url.URL, h http.Header) {
	page := res.Page
	xNoIndex, xNoFollow := xRobotsTag(h.Values("X-Robots-Tag"))
	res.NoIndex, res.NoFollow = xNoIndex, xNoFollow
	decoded, truncated, err := decodeBody(page.Body, page.ContentEncoding, f.cfg.BodyCap)
	if truncated {
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
	if !isHTML(page.ContentType, decoded) {
		return
	}
	urls, noIndex, noFollow := extractLinks(decoded, pageURL, f.cfg.DropParams)
	res.NoIndex = res.NoIndex || noIndex
	res.NoFollow = res.NoFollow || noFollow
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

// isHTML reports whether a body is HTML, by its Content-Type or, when
// there is none, by sniffing (http.DetectContentType).
func isHTML(contentType string, body []byte) bool {
	if strings.TrimSpace(contentType) == "" {
		contentType = http.DetectContentType(body)
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt, _, _ = strings.Cut(strings.ToLower(contentType), ";")
		mt = strings.TrimSpace(mt)
	}
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// extractLinks parses an HTML document (any bytes: the parser recovers from
// malformed markup and invalid UTF-8) and returns its links, normalized,
// http(s) only, each once, in document order, at most maxLinksPerPage:
// a[href], area[href], frame[src], iframe[src], link[href] with rel
// canonical or alternate, and a meta refresh target, resolved against the
// first base[href]; a and area with rel=nofollow are skipped. A meta robots
// (or meta name="drover") "noindex", "nofollow" or "none" sets noIndex and
// noFollow; with noFollow no link is returned.
//
// The document's charset is not converted: the bytes of a non-UTF-8 URL
// are percent-encoded as they are (browsers encode a query in the page's
// charset, so such links may differ from a browser's).
func extractLinks(body []byte, pageURL *url.URL, dropParams []string) (urls []string, noIndex, noFollow bool) {
	tags := linkTags(body)
	base := pageURL
	for _, t := range tags {
		if t.name != "base" {
			continue
		}
		if href, ok := t.attr("href"); ok {
			if b, err := pageURL.Parse(urlrule.TrimURL(href)); err == nil && (b.Scheme == "http" || b.Scheme == "https") {
				base = b
			}
			break // the first base[href] only
		}
	}

	seen := make(map[string]bool, len(tags))
	add := func(raw string) {
		if len(urls) >= maxLinksPerPage || raw == "" {
			return
		}
		n, err := urlrule.Normalize(raw, base, dropParams)
		if err != nil || seen[n] {
			return
		}
		seen[n] = true
		if urls == nil {
			urls = make([]string, 0, min(len(tags), maxLinksPerPage))
		}
		urls = append(urls, n)
	}

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
	if noFollow {
		return nil, noIndex, true
	}

	for _, t := range tags {
		switch t.name {
		case "a", "area":
			if hasToken(t.attrOr("rel"), "nofollow") {
				continue
			}
			add(t.attrOr("href"))
		case "link":
			rel := t.attrOr("rel")
			if hasToken(rel, "canonical") || hasToken(rel, "alternate") {
				add(t.attrOr("href"))
			}
		case "frame", "iframe":
			add(t.attrOr("src"))
		}
	}
	for _, u := range refresh {
		add(u)
	}
	return urls, noIndex, false
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
			// judged.
			z.NextIsNotRawText()
			sc.add(z)
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
// attributes, if linkTagName keeps it. The tokenizer's TagName copies the
// name of every tag; add reads it from Raw instead and calls TagAttr only
// on the tags it keeps.
func (sc *tagScratch) add(z *html.Tokenizer) {
	tn := linkTagName(z.Raw())
	if tn == "" {
		return
	}
	t := tag{name: tn}
	first := len(sc.spans)
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		if an := linkAttrName(k); an != "" {
			sc.spans = append(sc.spans, attrSpan{key: an, start: len(sc.vals), end: len(sc.vals) + len(v)})
			sc.vals = append(sc.vals, v...)
		}
	}
	t.first, t.last = first, len(sc.spans)
	sc.tags = append(sc.tags, t)
}

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

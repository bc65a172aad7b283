package fetch

import (
	"mime"
	"net/http"
	"net/url"
	"strings"

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
		for _, e := range sitemapLocs(decoded, pageURL, f.cfg.DropParams) {
			if u, err := url.Parse(e.loc); err == nil {
				if l := (urlrule.Link{URL: e.loc, LastMod: e.lastmod}); f.inScope(u, l.Depth(req.Depth), pageURL) {
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

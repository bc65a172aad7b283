package fetch

import (
	"bytes"
	"encoding/xml"
	"mime"
	"net/url"
	"strings"
	"time"

	"github.com/drover-crawl/drover/urlrule"
)

// maxSitemapURLs is the sitemaps protocol's limit per file.
const maxSitemapURLs = 50000

// isSitemap reports whether a body looks like a sitemap or a sitemap index:
// an XML content type (or none) and a <urlset> or <sitemapindex> root.
func isSitemap(contentType string, body []byte) bool {
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt != "" && mt != "application/xml" && mt != "text/xml" && !strings.HasSuffix(mt, "+xml") {
		return false
	}
	head := body[:min(len(body), 1024)]
	return bytes.Contains(head, []byte("<urlset")) || bytes.Contains(head, []byte("<sitemapindex"))
}

// sitemapEntry is a <url> of a sitemap (or a <sitemap> of an index): its
// <loc>, and its <lastmod> when it has a valid one.
type sitemapEntry struct {
	loc     string
	lastmod time.Time
}

// sitemapLocs returns the <loc> URLs of a sitemap (pages) or sitemap index
// (other sitemaps), resolved against the sitemap's URL and normalized, with
// their <lastmod>, at most maxSitemapURLs. Malformed XML ends the list
// where it breaks; a lastmod that is not a W3C datetime is none.
func sitemapLocs(body []byte, base *url.URL, dropParams []string) []sitemapEntry {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	var out []sitemapEntry
	var cur sitemapEntry
	inEntry := false // inside a <url> or <sitemap>
	var field string // "loc", "lastmod" or ""
	var text strings.Builder
	for len(out) < maxSitemapURLs {
		tok, err := d.Token()
		if err != nil {
			return out
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "url", "sitemap":
				cur, inEntry = sitemapEntry{}, true
			case "loc", "lastmod":
				field = t.Name.Local
				text.Reset()
			}
		case xml.CharData:
			if field != "" {
				text.Write(t)
			}
		case xml.EndElement:
			switch {
			case t.Name.Local == "loc" && field == "loc":
				if s, err := urlrule.Normalize(strings.TrimSpace(text.String()), base, dropParams); err == nil {
					cur.loc = s
					if !inEntry { // a bare <loc>: taken as it comes
						out, cur = append(out, cur), sitemapEntry{}
					}
				}
			case t.Name.Local == "lastmod" && field == "lastmod":
				cur.lastmod = parseW3CDate(strings.TrimSpace(text.String()))
			case t.Name.Local == "url" || t.Name.Local == "sitemap":
				if cur.loc != "" {
					out = append(out, cur)
				}
				cur, inEntry = sitemapEntry{}, false
			}
			if t.Name.Local == field {
				field = ""
			}
		}
	}
	return out
}

// w3cDates are the forms of a sitemap's <lastmod> (W3C Datetime).
var w3cDates = []string{time.RFC3339Nano, "2006-01-02T15:04Z07:00", "2006-01-02"}

func parseW3CDate(s string) time.Time {
	for _, f := range w3cDates {
		if t, err := time.Parse(f, s); err == nil {
			return t.UTC()
		}
	}
	return time.Time{}
}

package fetch

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"mime"
	"net/url"
	"strings"

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

// sitemapLocs returns the <loc> URLs of a sitemap (pages) or sitemap index
// (other sitemaps), resolved against the sitemap's URL and normalized, at
// most maxSitemapURLs. Malformed XML ends the list where it breaks.
func sitemapLocs(body []byte, base *url.URL, dropParams []string) []string {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = false
	var out []string
	inLoc := false
	var loc strings.Builder
	for len(out) < maxSitemapURLs {
		tok, err := d.Token()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return out
			}
			return out
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if t.Name.Local == "loc" {
				inLoc = true
				loc.Reset()
			}
		case xml.CharData:
			if inLoc {
				loc.Write(t)
			}
		case xml.EndElement:
			if t.Name.Local == "loc" && inLoc {
				inLoc = false
				if s, err := urlrule.Normalize(strings.TrimSpace(loc.String()), base, dropParams); err == nil {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

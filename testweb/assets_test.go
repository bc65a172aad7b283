package testweb

import (
	"bytes"
	"fmt"
	"image/png"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// assetConfig is a small asset-mode web; base keeps tests' webs apart.
func assetConfig(base byte) Config {
	return Config{Hosts: 2, PagesPerHost: 30, LinksPerPage: 8, NavLinks: 3, PageBytes: 2048, CrossHost: true, Assets: true, Base: base}
}

// contentTypes maps an extension to the media type its files must have.
var contentTypes = map[string]string{
	".css": "text/css", ".png": "image/png", ".webp": "image/webp",
	".js": "application/javascript", ".woff2": "font/woff2", ".html": "text/html",
}

// TestAssetsAreServed fetches every URL of Assets: 200, the media type of
// its extension, Body's bytes; PNGs decode (an @2x one at twice the size),
// the WebP is a well-formed RIFF file.
func TestAssetsAreServed(t *testing.T) {
	w := startWeb(t, assetConfig(41))
	c := newClient()
	assets := w.Assets()
	missing := w.MissingAssets()
	assert.Truef(t, slices.Equal(missing, assets), "before any request, MissingAssets() has %d URLs, want all %d of Assets()", len(missing), len(assets))
	pngs := map[string]string{} // body -> path, on one host
	for _, u := range assets {
		f := get(t, c, u)
		want := contentTypes[path.Ext(u)]
		assert.Falsef(t, f.status != http.StatusOK || want == "" || !strings.HasPrefix(f.ctype, want), "GET %s: %d %q, want 200 %q", u, f.status, f.ctype, want)
		b, ok := w.Body(u)
		assert.Falsef(t, !ok || !bytes.Equal(b, f.body), "Body(%s) (known %v) differs from the served bytes", u, ok)
		switch path.Ext(u) {
		case ".png":
			checkPNG(t, u, f.body)
			if strings.HasPrefix(u, "http://"+w.Hosts()[0]+"/") || strings.HasPrefix(u, "http://"+w.CDN()+"/") {
				p, _ := url.Parse(u)
				other, dup := pngs[string(f.body)]
				assert.Falsef(t, dup, "%s has the same bytes as %s", p.Path, other)
				pngs[string(f.body)] = p.Path
			}
		case ".webp":
			checkWebP(t, u, f.body)
		}
	}
	assert.Empty(t, w.MissingAssets(), "MissingAssets() after fetching every asset")
	for _, u := range w.OffLimits() {
		f := get(t, c, u)
		assert.Falsef(t, f.status != http.StatusOK || !strings.HasPrefix(f.ctype, "text/html"),
			"GET %s: %d %q; the off-limits page must exist, so that fetching it shows", u, f.status, f.ctype)
		assert.NotContainsf(t, assets, u, "Assets() lists the off-limits %s", u)
	}
	f := get(t, c, "http://"+w.CDN()+"/robots.txt")
	assert.Falsef(t, f.status != http.StatusOK || strings.Contains(string(f.body), "Disallow: /"),
		"the CDN's robots.txt: %d %q, want 200 allowing everything", f.status, f.body)
}

func checkPNG(t *testing.T, u string, body []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(body))
	if !assert.NoErrorf(t, err, "%s does not decode as PNG", u) {
		return
	}
	want := 1
	if strings.Contains(u, "@2x.") {
		want = 2
	}
	b := img.Bounds()
	assert.Falsef(t, b.Dx() != want || b.Dy() != want, "%s is %dx%d, want %dx%d", u, b.Dx(), b.Dy(), want, want)
}

// checkWebP checks the RIFF container: its size field and an even-sized
// chunk that fills it. Decoding is left to the browser test.
func checkWebP(t *testing.T, u string, b []byte) {
	t.Helper()
	le32 := func(p []byte) int { return int(p[0]) | int(p[1])<<8 | int(p[2])<<16 | int(p[3])<<24 }
	if !assert.Falsef(t, len(b) < 20 || string(b[:4]) != "RIFF" || string(b[8:12]) != "WEBP" || le32(b[4:8]) != len(b)-8,
		"%s is not a RIFF WEBP file of its length", u) {
		return
	}
	chunk := le32(b[16:20])
	kind := string(b[12:16])
	assert.Falsef(t, kind != "VP8L" && kind != "VP8 " || 20+chunk+chunk%2 != len(b), "%s: chunk %q of %d bytes does not fill the file of %d", u, b[12:16], chunk, len(b))
}

// TestAssetsAreWhatPagesEmbed follows every embed from every page, as a
// crawler with embeds would (HTML attributes, style blocks and attributes,
// url() and @import in stylesheets, the embedded widget's own embeds): the
// URLs reached are exactly Assets(), the CDN's at most 2 embeds from a
// page; the only <a href> on the CDN leads to OffLimits(), and no page of
// a host links to the CDN. With 3 pages a host, some variants go unused:
// Assets() leaves them out.
func TestAssetsAreWhatPagesEmbed(t *testing.T) {
	few := assetConfig(45)
	few.PagesPerHost = 3
	for _, cfg := range []Config{assetConfig(42), few} {
		t.Run(fmt.Sprintf("%d pages", cfg.PagesPerHost), func(t *testing.T) { checkEmbeds(t, startWeb(t, cfg)) })
	}
}

func checkEmbeds(t *testing.T, w *Web) {
	c := newClient()
	cdn := w.CDN()
	hops := map[string]int{} // embed URL -> fewest embeds from a page
	var queue []string
	embed := func(base *url.URL, ref string, hop int) {
		u, err := base.Parse(ref)
		require.NoErrorf(t, err, "embed %q of %s", ref, base)
		s := u.String()
		if old, seen := hops[s]; !seen || hop < old {
			hops[s] = hop
			queue = append(queue, s)
		}
	}
	var cdnLinks []string
	for _, p := range w.Pages() {
		f := get(t, c, p)
		if f.status != http.StatusOK || !strings.HasPrefix(f.ctype, "text/html") {
			continue
		}
		base, _ := url.Parse(p)
		embeds, links := scanHTML(t, f.body)
		assert.NotEmptyf(t, embeds, "%s embeds nothing", p)
		for _, ref := range embeds {
			embed(base, ref, 1)
		}
		for _, ref := range links {
			if u, err := base.Parse(ref); err == nil && u.Host == cdn {
				assert.Failf(t, "a page links to the CDN", "%s links (<a href>) to the CDN: %s", p, u)
			}
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := get(t, c, s)
		if !assert.Equalf(t, http.StatusOK, f.status, "embed %s: status", s) {
			continue
		}
		base, _ := url.Parse(s)
		var refs []string
		switch {
		case strings.HasPrefix(f.ctype, "text/css"):
			refs = cssRefs(string(f.body))
		case strings.HasPrefix(f.ctype, "text/html"):
			var links []string
			refs, links = scanHTML(t, f.body)
			for _, ref := range links {
				u, _ := base.Parse(ref)
				cdnLinks = append(cdnLinks, u.String())
			}
		}
		for _, ref := range refs {
			embed(base, ref, hops[s]+1)
		}
	}

	var reached []string
	for s, hop := range hops {
		reached = append(reached, s)
		u, _ := url.Parse(s)
		assert.Falsef(t, u.Host == cdn && hop > 2, "%s is %d embeds from a page, more than 2", s, hop)
	}
	extra, missing := diff(reached, w.Assets())
	assert.Falsef(t, len(extra)+len(missing) > 0, "embeds reached from the pages but not in Assets(): %v; in Assets() but not reached: %v", extra, missing)
	assert.Falsef(t, !slices.Equal(sorted(cdnLinks), sorted(w.OffLimits())) || len(cdnLinks) == 0,
		"links on the CDN's pages %v, OffLimits() %v", cdnLinks, w.OffLimits())
}

// diff returns what a has and b lacks, and what b has and a lacks.
func diff(a, b []string) (onlyA, onlyB []string) {
	for _, s := range a {
		if !slices.Contains(b, s) {
			onlyA = append(onlyA, s)
		}
	}
	for _, s := range b {
		if !slices.Contains(a, s) {
			onlyB = append(onlyB, s)
		}
	}
	return onlyA, onlyB
}

var (
	cssURLRE    = regexp.MustCompile(`url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]+))\s*\)`)
	cssImportRE = regexp.MustCompile(`@import\s+(?:"([^"]*)"|'([^']*)')`)
)

// cssRefs returns the url() and @import references of a stylesheet or
// style attribute.
func cssRefs(css string) []string {
	var out []string
	for _, re := range []*regexp.Regexp{cssURLRE, cssImportRE} {
		for _, m := range re.FindAllStringSubmatch(css, -1) {
			out = append(out, strings.Join(m[1:], "")) // one group matches
		}
	}
	return out
}

// scanHTML returns an HTML document's embeds (as a crawler with embeds
// finds them) and its <a href> links.
func scanHTML(t *testing.T, body []byte) (embeds, links []string) {
	t.Helper()
	doc, err := html.Parse(bytes.NewReader(body))
	require.NoError(t, err, "parsing HTML")
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode {
			continue
		}
		attr := map[string]string{}
		for _, a := range n.Attr {
			attr[a.Key] = a.Val
		}
		embeds = append(embeds, cssRefs(attr["style"])...)
		switch n.Data {
		case "a":
			links = append(links, attr["href"])
		case "img", "script", "source", "video", "audio", "track", "embed":
			if attr["src"] != "" {
				embeds = append(embeds, attr["src"])
			}
			embeds = append(embeds, srcset(attr["srcset"])...)
		case "link":
			embeds = append(embeds, attr["href"])
		case "object":
			embeds = append(embeds, attr["data"])
		case "style":
			if n.FirstChild != nil {
				embeds = append(embeds, cssRefs(n.FirstChild.Data)...)
			}
		}
	}
	return embeds, links
}

// srcset returns the URLs of a srcset attribute's candidates.
func srcset(s string) []string {
	var out []string
	for c := range strings.SplitSeq(s, ",") {
		if f := strings.Fields(c); len(f) > 0 {
			out = append(out, f[0])
		}
	}
	return out
}

// TestCDNIsNoSeed: the CDN is one more loopback IP after the hosts, outside
// Seeds, Hosts and Pages, and the pages are the same with and without
// assets; without assets there is no CDN.
func TestCDNIsNoSeed(t *testing.T) {
	cfg := assetConfig(43)
	w := startWeb(t, cfg)
	cdn := w.CDN()
	ip, _, err := net.SplitHostPort(cdn)
	assert.Falsef(t, err != nil || ip != "127.43.0.3", "CDN() = %q, want 127.43.0.3, the IP after the 2 hosts', and the port", cdn)
	assert.Falsef(t, slices.Contains(w.Hosts(), cdn) || slices.Contains(w.IPs(), ip), "the CDN %s is among Hosts() %v or IPs() %v", cdn, w.Hosts(), w.IPs())
	for _, u := range append(w.Seeds(), w.Pages()...) {
		assert.NotContainsf(t, u, cdn, "%s, in Seeds() or Pages(), is on the CDN", u)
	}

	cfg.Assets = false
	cfg.Base = 44
	plain := startWeb(t, cfg)
	assert.Falsef(t, plain.CDN() != "" || plain.Assets() != nil || plain.OffLimits() != nil,
		"without assets: CDN() %q, Assets() %v, OffLimits() %v; want none", plain.CDN(), plain.Assets(), plain.OffLimits())
	assert.Equal(t, byHostIndex(w, w.Pages()), byHostIndex(plain, plain.Pages()), "Pages() differ with and without assets")
	root, _ := plain.Body(plain.Seeds()[0])
	assert.False(t, bytes.Contains(root, []byte("/assets/")), "a page without assets references /assets/")
}

// byHostIndex writes each URL's "http://IP:PORT" as "host N".
func byHostIndex(w *Web, urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = u
		for h, addr := range w.Hosts() {
			if strings.HasPrefix(u, "http://"+addr+"/") {
				out[i] = "host " + strconv.Itoa(h) + u[len("http://"+addr):]
			}
		}
	}
	return out
}

package testweb

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
)

// The asset mode (Config.Assets): what the pages reference and what the
// hosts and the CDN serve for it.

// assetVariants is the number of variants K of the per-page assets
// bg-K.png, img-K.png (with img-K@2x.png) and pic-K.webp (with pic-K.png).
const assetVariants = 8

// Content types of the assets.
const (
	contentCSS   = "text/css; charset=utf-8"
	contentPNG   = "image/png"
	contentWebP  = "image/webp"
	contentJS    = "application/javascript"
	contentWOFF2 = "font/woff2"
)

// Paths of the CDN: cdnWidget is embedded by host 0's root; cdnSecret is a
// navigational link of the widget, which a crawler must not follow.
const (
	cdnLogo      = "/cdn/logo.png"
	cdnCSS       = "/cdn/cdn.css"
	cdnBg        = "/cdn/cdn-bg.png"
	cdnWidget    = "/cdn/widget.html"
	cdnWidgetImg = "/cdn/w.png"
	cdnSecret    = "/cdn/secret.html"
)

// hostAssetPaths are the assets every page of a host references, directly
// or through its stylesheets, whatever its variants.
var hostAssetPaths = []string{
	"/assets/site.css", "/assets/base.css", "/assets/fonts/f.woff2",
	"/assets/hero.png", "/assets/base.png", "/assets/tile.png", "/assets/app.js",
}

const (
	// siteCSS imports base.css (relative), declares a font (relative to
	// the stylesheet: /assets/fonts/f.woff2) that the body uses, and draws
	// /assets/hero.png and the height of the inline-styled tile.
	siteCSS = `@import "base.css";
@font-face { font-family: "Drover"; src: url(fonts/f.woff2) format("woff2"); }
body { font-family: "Drover", sans-serif; }
.hero { height: 8px; background: url("/assets/hero.png") no-repeat; }
.tile { height: 8px; }
`
	baseCSS = ".base { height: 8px; background-image: url(/assets/base.png); }\n"
	// cdnCSSBody's url is relative to the stylesheet: /cdn/cdn-bg.png.
	cdnCSSBody = ".cdn { height: 8px; background-image: url(cdn-bg.png); }\n"
	appJS      = "document.documentElement.dataset.testweb = \"app.js ran\";\n"
	widgetHTML = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Widget</title>\n</head>\n<body>\n" +
		"<p><img src=\"" + cdnWidgetImg + "\" alt=\"widget\"> <a href=\"" + cdnSecret + "\">More from the CDN</a></p>\n</body>\n</html>\n"
	secretHTML = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Off limits</title>\n</head>\n<body>\n" +
		"<p>Only a link of the CDN's widget leads here: a crawler that follows no link off its scope never sees this.</p>\n</body>\n</html>\n"
	cdnRobots = "User-agent: *\nDisallow:\n"
)

// tinyWebP is a 1x1 lossless WebP: a RIFF "WEBP" file holding one VP8L
// chunk (signature 0x2f, width and height 1, one pixel).
var tinyWebP = []byte{
	'R', 'I', 'F', 'F', 0x1a, 0x00, 0x00, 0x00, 'W', 'E', 'B', 'P',
	'V', 'P', '8', 'L', 0x0d, 0x00, 0x00, 0x00,
	0x2f, 0x00, 0x00, 0x00, 0x10, 0x07, 0x10, 0x11, 0x11, 0x88, 0x88, 0xfe, 0x07,
	0x00, // padding to an even chunk size
}

// fontBytes is not a font: only the WOFF2 signature and filler. A browser
// reports it to its console (a font that fails to decode, replaced by the
// fallback); the request itself succeeds, so no check of requests fails.
var fontBytes = []byte("wOF2 testweb: a stand-in, not a font\n")

// assetWeb is the asset mode: the CDN's address and what the hosts and the
// CDN serve for the pages' embeds. Built at Start and read-only afterwards,
// it needs no lock; its zero value is a web without assets. Web embeds it,
// so its methods are Web's.
type assetWeb struct {
	cdnAddr   string              // "IP:PORT" of the CDN, "" without assets
	host      map[string]response // by path; the same on every host
	cdn       map[string]response // by path
	urls      []string            // Assets()
	offLimits []string            // OffLimits()
}

// variants are the per-page choices of K.
type variants struct{ bg, img, pic int }

// pageVariants draws page n of host h's variants from a source of its own,
// so that the pages' other content is the same with and without assets.
func pageVariants(h, n int) variants {
	r := rand.New(rand.NewPCG(0xa55e7, uint64(h)<<32|uint64(n)))
	return variants{r.IntN(assetVariants), r.IntN(assetVariants), r.IntN(assetVariants)}
}

// newAssetWeb builds the assets' bodies and the list of URLs that the pages
// of the hosts at addrs, pagesPerHost each, reference, with the CDN at
// cdnAddr.
func newAssetWeb(addrs []string, cdnAddr string, pagesPerHost int) assetWeb {
	a := assetWeb{cdnAddr: cdnAddr, host: map[string]response{}, cdn: map[string]response{}}
	add := func(m map[string]response, path, ctype string, body []byte) {
		m[path] = response{status: http.StatusOK, ctype: ctype, body: body, known: true}
	}
	add(a.host, "/assets/site.css", contentCSS, []byte(siteCSS))
	add(a.host, "/assets/base.css", contentCSS, []byte(baseCSS))
	add(a.host, "/assets/fonts/f.woff2", contentWOFF2, fontBytes)
	add(a.host, "/assets/app.js", contentJS, []byte(appJS))
	for _, p := range []string{"/assets/hero.png", "/assets/base.png", "/assets/tile.png"} {
		add(a.host, p, contentPNG, tinyPNG(p, 1))
	}
	for k := range assetVariants {
		for _, p := range []string{bgPath(k), imgPath(k), picPNGPath(k)} {
			add(a.host, p, contentPNG, tinyPNG(p, 1))
		}
		add(a.host, img2xPath(k), contentPNG, tinyPNG(img2xPath(k), 2))
		add(a.host, picWebPPath(k), contentWebP, tinyWebP)
	}
	add(a.cdn, "/robots.txt", "text/plain; charset=utf-8", []byte(cdnRobots))
	add(a.cdn, cdnCSS, contentCSS, []byte(cdnCSSBody))
	add(a.cdn, cdnWidget, contentHTML, []byte(widgetHTML))
	add(a.cdn, cdnSecret, contentHTML, []byte(secretHTML))
	for _, p := range []string{cdnLogo, cdnBg, cdnWidgetImg} {
		add(a.cdn, p, contentPNG, tinyPNG(p, 1))
	}
	a.urls = assetURLs(addrs, cdnAddr, pagesPerHost)
	a.offLimits = []string{"http://" + cdnAddr + cdnSecret}
	return a
}

// assetURLs lists what the pages reference: per host the common assets,
// then the variants its pages use in order of K, then the CDN's.
func assetURLs(addrs []string, cdnAddr string, pagesPerHost int) []string {
	var urls []string
	for h, addr := range addrs {
		var used [3][assetVariants]bool
		for n := range pagesPerHost {
			v := pageVariants(h, n)
			used[0][v.bg], used[1][v.img], used[2][v.pic] = true, true, true
		}
		paths := slices.Clone(hostAssetPaths)
		for k := range assetVariants {
			if used[0][k] {
				paths = append(paths, bgPath(k))
			}
			if used[1][k] {
				paths = append(paths, imgPath(k), img2xPath(k))
			}
			if used[2][k] {
				paths = append(paths, picWebPPath(k), picPNGPath(k))
			}
		}
		for _, p := range paths {
			urls = append(urls, "http://"+addr+p)
		}
	}
	for _, p := range []string{cdnLogo, cdnCSS, cdnBg, cdnWidget, cdnWidgetImg} {
		urls = append(urls, "http://"+cdnAddr+p)
	}
	return urls
}

func bgPath(k int) string      { return "/assets/bg-" + strconv.Itoa(k) + ".png" }
func imgPath(k int) string     { return "/assets/img-" + strconv.Itoa(k) + ".png" }
func img2xPath(k int) string   { return "/assets/img-" + strconv.Itoa(k) + "@2x.png" }
func picWebPPath(k int) string { return "/assets/pic-" + strconv.Itoa(k) + ".webp" }
func picPNGPath(k int) string  { return "/assets/pic-" + strconv.Itoa(k) + ".png" }

// tinyPNG is a size x size PNG of one colour drawn from name, so that no
// two images have the same bytes.
func tinyPNG(name string, size int) []byte {
	f := fnv.New32a()
	f.Write([]byte(name))
	v := f.Sum32()
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	c := color.NRGBA{R: byte(v), G: byte(v >> 8), B: byte(v >> 16), A: 0xff}
	for y := range size {
		for x := range size {
			img.SetNRGBA(x, y, c)
		}
	}
	var b bytes.Buffer
	_ = png.Encode(&b, img) // fails only when writing fails; a bytes.Buffer does not
	return b.Bytes()
}

// headAssets is what page n of host h carries in its head: its host's
// stylesheet, the CDN's, a style block with the page's background and the
// script. "" without assets.
func (a *assetWeb) headAssets(h, n int) string {
	if a.cdnAddr == "" {
		return ""
	}
	v := pageVariants(h, n)
	return fmt.Sprintf("<link rel=\"stylesheet\" href=\"/assets/site.css\">\n"+
		"<link rel=\"stylesheet\" href=\"http://%s%s\">\n"+
		"<style>.banner { min-height: 8px; background-image: url(%s); }</style>\n"+
		"<script src=\"/assets/app.js\"></script>\n", a.cdnAddr, cdnCSS, bgPath(v.bg))
}

// bodyAssets opens the body of page n of host h: elements that draw the
// stylesheets' images, the images themselves and, on host 0's root, the
// CDN's widget. "" without assets.
func (a *assetWeb) bodyAssets(h, n int) string {
	if a.cdnAddr == "" {
		return ""
	}
	v := pageVariants(h, n)
	var b bytes.Buffer
	b.WriteString("<header class=\"banner\">\n")
	fmt.Fprintf(&b, "<img src=\"http://%s%s\" alt=\"logo\">\n", a.cdnAddr, cdnLogo)
	b.WriteString("<div class=\"tile\" style=\"background-image:url('/assets/tile.png')\"></div>\n")
	b.WriteString("<div class=\"hero\"></div><div class=\"base\"></div><div class=\"cdn\"></div>\n")
	fmt.Fprintf(&b, "<img src=\"%s\" srcset=\"%s 1x, %s 2x\" alt=\"figure\">\n", imgPath(v.img), imgPath(v.img), img2xPath(v.img))
	fmt.Fprintf(&b, "<picture><source srcset=\"%s\" type=\"image/webp\"><img src=\"%s\" alt=\"picture\"></picture>\n",
		picWebPPath(v.pic), picPNGPath(v.pic))
	if h == 0 && n == 0 {
		fmt.Fprintf(&b, "<object data=\"http://%s%s\" type=\"text/html\"></object>\n", a.cdnAddr, cdnWidget)
	}
	b.WriteString("</header>\n")
	return b.String()
}

// CDN returns "IP:PORT" of the asset mode's CDN, "" without assets. It is
// not among Seeds, Hosts or IPs: a crawl of the seeds sees it out of scope.
func (a *assetWeb) CDN() string { return a.cdnAddr }

// Assets returns every URL a crawler that fetches embeds must fetch for
// Pages, nil without assets: per host the stylesheets, images (every srcset
// candidate and <picture> source), script and font its pages reference,
// directly or from the stylesheets; then the CDN's logo, stylesheet and its
// image, the widget host 0's root embeds and the widget's image. Seen from
// a page, the CDN's resources are 1 or 2 embeds away. It excludes
// robots.txt and OffLimits.
func (a *assetWeb) Assets() []string { return append([]string(nil), a.urls...) }

// OffLimits returns the URLs a crawler must never request, nil without
// assets: the CDN's /cdn/secret.html, to which only an <a href> of the
// widget leads, a navigational link on a host outside the scope.
func (a *assetWeb) OffLimits() []string { return append([]string(nil), a.offLimits...) }

// MissingAssets returns the URLs of Assets never requested, in Assets order.
func (w *Web) MissingAssets() []string { return w.unrequested(w.assetWeb.urls) }

// routeAsset answers path on a host when it is an asset.
func (a *assetWeb) routeAsset(path string) (response, bool) {
	res, ok := a.host[path]
	return res, ok
}

// routeCDN answers path on the CDN.
func (a *assetWeb) routeCDN(path string) response {
	if res, ok := a.cdn[path]; ok {
		return res
	}
	return response{status: http.StatusNotFound, ctype: "text/plain; charset=utf-8", body: notFoundBody}
}

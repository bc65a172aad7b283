package replay

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// origin is the archived site: a loopback address where nothing listens,
// so that a request that bypasses the proxy fails.
const origin = "http://127.5.5.5:8080"

var (
	pageURL  = origin + "/page.html"
	cssURL   = origin + "/style.css"
	imageURL = origin + "/img.png"
)

func response(uri string, status int, ctype string, body []byte) *Response {
	return &Response{URI: uri, Status: status, Header: http.Header{"Content-Type": {ctype}}, Body: body}
}

func writeWARC(t *testing.T, file string, responses ...*Response) {
	t.Helper()
	require.NoError(t, WriteWARC(file, responses...))
}

// onePixel is a 1x1 PNG.
func onePixel(t *testing.T) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, 1, 1))
	img.Set(0, 0, color.NRGBA{R: 200, A: 255})
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

// siteArchive writes the site in a new directory: the page in a .warc,
// the stylesheet and, when withImage, the image in a .warc.gz.
func siteArchive(t *testing.T, withImage bool) string {
	t.Helper()
	dir := t.TempDir()
	page := `<!DOCTYPE html><html><head><title>Archived</title><link rel="stylesheet" href="style.css"></head>` +
		`<body><h1>Archived</h1><img src="/img.png" alt="pixel"></body></html>`
	writeWARC(t, filepath.Join(dir, "a.warc"), response(pageURL, 200, "text/html; charset=utf-8", []byte(page)))
	assets := []*Response{response(cssURL, 200, "text/css", []byte("h1 { color: teal; }\n"))}
	if withImage {
		assets = append(assets, response(imageURL, 200, "image/png", onePixel(t)))
	}
	writeWARC(t, filepath.Join(dir, "b.warc.gz"), assets...)
	return dir
}

// replayed opens dir and serves it as a proxy for the test's length.
func replayed(t *testing.T, dir string) (*Archive, string) {
	t.Helper()
	a, err := Open(dir)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return a, srv.Listener.Addr().String()
}

// TestReplayInChromium loads an archived page in Chromium through the
// proxy: from a complete archive, with no failure, the stylesheet and the
// image requested through the proxy (the site's address has no server: a
// request that bypassed the proxy would fail); from an archive without the
// image, with the image named as failed, and as broken.
func TestReplayInChromium(t *testing.T) {
	RequireChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	a, proxy := replayed(t, siteArchive(t, true))
	rep, err := LoadPages(ctx, proxy, []string{pageURL})
	require.NoError(t, err, "LoadPages")
	p := rep.Pages[0]
	assert.Falsef(t, p.Status != http.StatusOK || len(rep.Failures()) != 0 || len(p.BrokenImages) != 0,
		"complete archive: page status %d, failures %v, broken images %v; want 200 and none", p.Status, rep.Failures(), p.BrokenImages)
	for _, u := range []string{cssURL, imageURL} {
		assert.Falsef(t, !slices.Contains(p.Requests, u) || !slices.Contains(a.Served(), u),
			"%s: requested by the page %v, served by the proxy %v; want both", u, p.Requests, a.Served())
	}
	assert.Falsef(t, !slices.Contains(a.Served(), pageURL) || len(a.Misses()) != 0,
		"the proxy served %v and missed %v; want the page served and no miss", a.Served(), a.Misses())

	a, proxy = replayed(t, siteArchive(t, false))
	rep, err = LoadPages(ctx, proxy, []string{pageURL})
	require.NoError(t, err, "LoadPages")
	p = rep.Pages[0]
	want := []Failure{{Page: pageURL, URL: imageURL, Reason: describe(http.StatusNotFound)}}
	assert.Falsef(t, !slices.Equal(rep.Failures(), want) || !slices.Equal(p.BrokenImages, []string{imageURL}),
		"archive without the image: failures %v, broken images %v; want %v and the image", rep.Failures(), p.BrokenImages, want)
	assert.Falsef(t, !slices.Equal(a.Misses(), []string{imageURL}) || p.Status != http.StatusOK,
		"archive without the image: proxy misses %v, page status %d; want the image alone, and 200", a.Misses(), p.Status)
}

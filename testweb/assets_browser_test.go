package testweb

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/internal/replay"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAssetsInChromium loads pages of an asset web in headless Chromium,
// first from the web itself, then replayed from an archive of Pages and
// Assets alone, with nothing reaching the web. Both loads fail no request
// and decode every image; everything the browser asks for is in Assets,
// the widget's image included (the CDN's frame loads); the picture's WebP
// is the source the browser picks.
func TestAssetsInChromium(t *testing.T) {
	replay.RequireChromium(t)
	w := startWeb(t, assetConfig(46))
	pages := []string{w.Seeds()[0], w.Seeds()[1] + "p/3.html"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	direct, err := replay.LoadPages(ctx, "", pages)
	require.NoError(t, err, "LoadPages from the web")
	checkLoaded(t, "from the web", w, direct)
	root := direct.Pages[0].Requests
	for _, want := range []string{"http://" + w.CDN() + cdnWidgetImg, ".webp", "/assets/fonts/f.woff2", "/assets/base.png"} {
		assert.Truef(t, slices.ContainsFunc(root, func(u string) bool { return strings.HasSuffix(u, want) }),
			"loading %s requested no %s; it requested %v", pages[0], want, root)
	}

	a, proxy := archiveWeb(t, w)
	w.Reset()
	replayed, err := replay.LoadPages(ctx, proxy, pages)
	require.NoError(t, err, "LoadPages from the archive")
	checkLoaded(t, "from the archive", w, replayed)
	assert.Empty(t, a.Misses(), "replay asked the archive for URLs it lacks")
	n := w.Total()
	assert.Zerof(t, n, "replay sent %d requests to the web, want all of them to the archive: %v", n, w.Requests())
	for i, p := range replayed.Pages {
		assert.Truef(t, slices.Equal(sorted(p.Requests), sorted(direct.Pages[i].Requests)), "%s requested %v replayed, %v from the web", p.URL, p.Requests, direct.Pages[i].Requests)
	}
}

// checkLoaded checks that every page loaded with 200, no failed request
// and no broken image, and requested only URLs of Assets.
func checkLoaded(t *testing.T, how string, w *Web, rep replay.Report) {
	t.Helper()
	assets := w.Assets()
	for _, p := range rep.Pages {
		assert.Falsef(t, p.Status != http.StatusOK || len(p.Failures) != 0 || len(p.BrokenImages) != 0,
			"%s, %s: status %d, failures %v, broken images %v; want 200 and none", how, p.URL, p.Status, p.Failures, p.BrokenImages)
		assert.NotEmptyf(t, p.Requests, "%s, %s requested no asset", how, p.URL)
		for _, u := range p.Requests {
			assert.Containsf(t, assets, u, "%s, %s requested %s, which is not in Assets()", how, p.URL, u)
		}
	}
}

// archiveWeb fetches every URL of Pages and Assets into a WARC and serves
// it as a replaying proxy; it returns the archive and the proxy's address.
func archiveWeb(t *testing.T, w *Web) (*replay.Archive, string) {
	t.Helper()
	c := newClient()
	var archived []*replay.Response
	for _, u := range append(w.Pages(), w.Assets()...) {
		resp, err := c.Get(u)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoErrorf(t, err, "GET %s", u)
		archived = append(archived, &replay.Response{URI: u, Status: resp.StatusCode, Header: resp.Header, Body: body})
	}
	dir := t.TempDir()
	require.NoError(t, replay.WriteWARC(filepath.Join(dir, path.Base(t.Name())+".warc.gz"), archived...))
	a, err := replay.Open(dir)
	require.NoError(t, err)
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return a, srv.Listener.Addr().String()
}

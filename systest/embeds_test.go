package systest_test

// A crawl with embeds, as an archivist runs one: pages with images,
// stylesheets (url() and @import), scripts, srcset and a CDN host out of
// scope, stored in WARC files. The server saw every page and every asset
// once and nothing off limits; then, with the test web closed, headless
// Chromium loads captured pages from the WARC records alone, through a
// replaying proxy, and no subrequest fails.

import (
	"context"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/internal/replay"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// replayPages is how many captured pages the browser loads.
const replayPages = 20

func TestEmbedsCrawlReplaysFromWARC(t *testing.T) {
	replay.RequireChromium(t)
	web := webtest.Start(t, testweb.Config{Hosts: 3, PagesPerHost: 30, CrossHost: true, Assets: true, Base: 141})
	s := startStack(t)
	dir := t.TempDir()
	cfg := s.newCampaign("embeds", web, 2)
	cfg.Sinks = []string{"warc:" + dir}
	cfg.PerHostDelay = new(time.Millisecond)
	st := runCampaign(t, s.temporal.Client(), cfg, 5*time.Minute)()
	t.Logf("campaign %s: %d pages and assets fetched", cfg.ID, st.PagesFetched)

	// What the server saw: every page and every asset once, CDN ones
	// included, and not the CDN's page that only a link leads to.
	checkFetchedOnce(t, web)
	if m := web.MissingAssets(); len(m) > 0 {
		assert.Failf(t, "assets never requested", "%d of %d assets never requested: %v", len(m), len(web.Assets()), m)
	}
	for _, u := range web.OffLimits() {
		n := web.Count(u)
		assert.Zero(t, n, "%s requested %d times: a link on an out-of-scope host was followed", u, n)
	}
	require.NoError(t, web.Close())

	// The replay: the archive alone answers the browser.
	archive, err := replay.Open(dir)
	require.NoError(t, err)
	for _, u := range append(web.Pages(), web.Assets()...) {
		_, ok := archive.Lookup(u)
		assert.True(t, ok, "%s is not in the WARC files", u)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	proxy := &http.Server{Handler: archive.Handler()}
	go proxy.Serve(ln)
	t.Cleanup(func() { proxy.Close() })
	pages := web.Pages()[:replayPages]
	ctx, cancel := context.WithTimeout(context.Background(), replayPages*replay.PageTimeout+replay.StartTimeout)
	defer cancel()
	rep, err := replay.LoadPages(ctx, ln.Addr().String(), pages)
	require.NoError(t, err)
	requests := 0
	for _, p := range rep.Pages {
		requests += len(p.Requests)
		assert.Empty(t, p.BrokenImages, "%s: images that did not decode: %v", p.URL, p.BrokenImages)
	}
	failed := rep.Failures()
	assert.Empty(t, failed, "%d failed subrequests replaying %d pages: %v", len(failed), len(pages), failed)
	if m := archive.Misses(); len(m) > 0 {
		assert.Failf(t, "the browser asked for what the archive does not hold", "the browser asked for what the archive does not hold: %v", m)
	}
	// A page that asked for no asset would prove nothing.
	assert.GreaterOrEqual(t, requests, 10*len(pages), "%d requests for %d pages: the pages' assets were not loaded", requests, len(pages))
	t.Logf("replayed %d pages from %s: %d requests, %d failed", len(pages), filepath.Base(dir), requests, len(failed))
}

package replay

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/drover-crawl/drover/internal/testenv"
)

// Bounds of LoadPages' waits.
const (
	// StartTimeout bounds the start of the browser.
	StartTimeout = 30 * time.Second
	// PageTimeout bounds each page: its load event, its fonts, and the end
	// of every request it made.
	PageTimeout = 30 * time.Second
)

// Report is what LoadPages saw, a PageReport per page, in order.
type Report struct {
	Pages []PageReport
}

// PageReport is what one page's load did.
type PageReport struct {
	// URL is the page as asked for.
	URL string
	// Status is the status of the page's own response (the last of its
	// redirects); 0 when none came.
	Status int
	// Requests are the URLs of the page's http(s) subrequests (its
	// frames' included), in the order the browser made them, the page
	// itself excluded.
	Requests []string
	// Failures are the requests that failed, the page's own included: a
	// network error, a blocked response, or a status of 400 or more.
	Failures []Failure
	// BrokenImages are the current sources of the page's <img> elements
	// (its frames' excluded) that did not decode.
	BrokenImages []string
}

// Failure is one failed request.
type Failure struct {
	Page   string // the page being loaded
	URL    string
	Reason string // the browser's error text ("net::ERR_..."), or the HTTP status
}

func (f Failure) String() string { return f.URL + ": " + f.Reason }

// Failures returns the failures of every page, in order.
func (r Report) Failures() []Failure {
	var out []Failure
	for _, p := range r.Pages {
		out = append(out, p.Failures...)
	}
	return out
}

// Chromium returns the path of a Chromium (or Chrome) binary: the
// environment variable DROVER_CHROMIUM, or else the first of chromium,
// chromium-browser and google-chrome on PATH.
func Chromium() (string, error) {
	if p := os.Getenv("DROVER_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("replay: no chromium on PATH (apt-get install chromium; .ci/run installs it)")
}

// RequireChromium skips the test under -short (testenv.NeedsBrowser), or
// when no Chromium is found (see Chromium), except in CI (CI set), where
// it fails it.
func RequireChromium(t testing.TB) {
	t.Helper()
	testenv.NeedsBrowser(t)
	if _, err := Chromium(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
}

// browserFlags are the flags of every browser LoadPages starts, after
// chromedp's defaults: no sandbox (tests run as root), no GPU, no
// background connections of a new profile; site isolation off, so that a
// cross-site frame loads in the page's process and its requests reach the
// page's event stream (with it on, a cross-site frame's requests end in
// another target and the page never looks done); no HTTPS upgrades, which
// would try https (a CONNECT, refused) first for host names. The features
// chromedp disables stay disabled.
var browserFlags = []chromedp.ExecAllocatorOption{
	chromedp.NoSandbox, chromedp.DisableGPU,
	chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-site-isolation-trials", true),
	chromedp.Flag("disable-features", "Translate,BlinkGenPropertyTrees,IsolateOrigins,SitePerProcess,HttpsUpgrades"),
}

// proxyBypass sends loopback URLs through the proxy too (Chromium bypasses
// proxies for them by default), and the browser's own connections to
// Google's services past it, so that they do not land in the archive's
// Misses (offline, they fail).
const proxyBypass = "<-loopback>;*.google.com;*.googleapis.com;*.gvt1.com;*.gstatic.com"

// favicon is blocked: the browser asks for every site's /favicon.ico on
// its own, at any time around a page's load, for the tab's icon.
const favicon = "*://*:*/favicon.ico"

// LoadPages starts headless Chromium, loads each page in turn in one tab
// with the cache off, and reports what each did. With proxyAddr ("host:port")
// every request goes through that HTTP proxy, loopback URLs included; with
// "" the browser connects directly. The browser's own requests (the tab's
// icon: /favicon.ico is blocked) are left out. A page is done when its load event has fired,
// its fonts have loaded and every request it made has ended, within
// PageTimeout. It fails when the browser does not start, or a page fails
// to navigate or to finish; the report then holds the pages done so far
// and the failing one.
func LoadPages(ctx context.Context, proxyAddr string, pages []string) (Report, error) {
	path, err := Chromium()
	if err != nil {
		return Report{}, err
	}
	profile, err := os.MkdirTemp("", "drover-replay-chromium-")
	if err != nil {
		return Report{}, fmt.Errorf("replay: profile directory: %w", err)
	}
	defer os.RemoveAll(profile)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.UserDataDir(profile))
	opts = append(opts, browserFlags...)
	if proxyAddr != "" {
		opts = append(opts, chromedp.ProxyServer("http://"+proxyAddr), chromedp.Flag("proxy-bypass-list", proxyBypass))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(actx)
	defer cancel()

	rec := newRecorder()
	// The first call on bctx itself starts the browser, which lives as long
	// as bctx: the start is bounded from outside.
	started := make(chan error, 1)
	go func() { started <- chromedp.Listen(bctx, rec.event) }()
	select {
	case err = <-started:
	case <-time.After(StartTimeout):
		cancel()
		err = fmt.Errorf("no answer within %s", StartTimeout)
	}
	if err == nil {
		_, err = chromedp.Call(bctx, network.SetCacheDisabled, network.SetCacheDisabledParams{CacheDisabled: true})
	}
	if err == nil {
		_, err = chromedp.Call(bctx, network.SetBlockedURLs, network.SetBlockedURLsParams{URLPatterns: []*network.BlockPattern{{URLPattern: favicon, Block: true}}})
	}
	if err != nil {
		return Report{}, fmt.Errorf("replay: starting %s: %w", path, err)
	}

	var rep Report
	for _, p := range pages {
		pr, err := loadPage(bctx, rec, p)
		rep.Pages = append(rep.Pages, pr)
		if err != nil {
			return rep, fmt.Errorf("replay: loading %s: %w", p, err)
		}
	}
	return rep, nil
}

// brokenImages lists the page's images that did not decode.
const brokenImages = `[...document.images].filter(i => !i.complete || i.naturalWidth === 0).map(i => i.currentSrc || i.src)`

// loadPage navigates to page and waits for it to be done.
func loadPage(bctx context.Context, rec *recorder, page string) (PageReport, error) {
	ctx, cancel := context.WithTimeout(bctx, PageTimeout)
	defer cancel()
	rec.begin(page)
	_, err := chromedp.Run(ctx, chromedp.NavigateResponse(page))
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Evaluate[bool](`document.fonts.ready.then(() => true)`, chromedp.EvalAwaitPromise))
	}
	var broken []string
	if err == nil {
		broken, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](brokenImages))
	}
	if err == nil {
		err = rec.waitIdle(ctx)
	}
	pr := rec.end()
	pr.BrokenImages = broken
	return pr, err
}

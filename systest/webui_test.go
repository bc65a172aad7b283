package systest_test

// The Temporal Web UI, the campaign's admin console, checked in a
// real browser (Debian's headless Chromium, driven over the DevTools
// protocol by chromedp) on a running campaign, as an operator would look
// at it.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/devstack"
	"github.com/drover-crawl/drover/envconf"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/starter/cli"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

// uiWait bounds every wait on the Web UI: a page that does not show what
// is waited for within it fails the test.
const uiWait = 30 * time.Second

// bodyText is the page's text; "" while a navigation has no body yet (as
// the frames' expression reads a frame still loading), so that a poll
// waits instead of failing on the page's half-loaded state.
const bodyText = `document.body?.innerText ?? ''`

// TestWebUIInBrowser starts a campaign with the starter (TEMPORAL_UI_URL
// set to the dev server's Web UI), slow enough to be running throughout,
// and opens the Web UI in headless Chromium: the workflow list filtered
// by the CampaignState search attribute lists it (and a filter on another
// state does not); the link the starter printed opens its page, whose
// input shows durations as durations, whose User Metadata shows the
// starter's summary and details and the workflow's current details, and
// whose search attributes hold CampaignState "running". Screenshots of
// each step are kept under out/webui/ (printed).
func TestWebUIInBrowser(t *testing.T) {
	browser := chromium(t)
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 200, CrossHost: true, Base: 77})
	s := withWorkers(t, withScheduler(t, startServicesWith(t, devstack.TemporalOptions{}))) // the Web UI on a free port
	ui := s.temporal.UIURL()

	id := fmt.Sprintf("webui-%d", rand.IntN(1e9))
	starter := func(args ...string) string {
		t.Helper()
		var out, errb strings.Builder
		app := &cli.App{
			Env: cli.Env{Env: envconf.Env{TemporalAddress: s.temporal.Address(), TemporalNamespace: s.temporal.Namespace(), TemporalUIURL: ui, Schedulers: []string{s.sched.Addr()}, Token: session.DevToken}},
			Out: &out, Err: &errb, Dial: cli.DialTemporal, Stats: sessiontest.CampaignStats,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		code := app.Run(ctx, args)
		require.Equal(t, cli.ExitOK, code, "starter %s: exit %d\n%s%s", strings.Join(args, " "), code, out.String(), errb.String())
		return out.String()
	}
	// 400 pages on 2 hosts at 300 ms each: a minute at least, longer than
	// the test looks.
	out := starter("start", "--id", id, "--seed", web.Seeds()[0], "--seed", web.Seeds()[1], "--allow-private",
		"--fetchers", "2", "--per-host-delay", "300ms", "--sink", "kafka://"+s.kafka.Addr()+"/"+s.topic)
	t.Cleanup(func() { starter("stop", id) })
	m := regexp.MustCompile(`Web UI: (\S+)`).FindStringSubmatch(out)
	require.NotNil(t, m, "start printed no Web UI link:\n%s", out)
	link := m[1]
	want := ui + "/namespaces/default/workflows/" + id
	require.Equal(t, want, link, "start printed the link %s, want %s (TEMPORAL_UI_URL)", link, want)

	b := newBrowser(t, browser)
	list := func(query string) string {
		return ui + "/namespaces/default/workflows?query=" + url.QueryEscape(query)
	}

	// The list, filtered by the search attribute (the dev server is the
	// test's own: nothing else is listed).
	b.open(list(`CampaignState="running"`))
	b.waitText(`the campaign listed under the filter CampaignState="running"`, bodyText,
		`CampaignState =`, `"running"`, "Select Workflow "+id, "Running", "Campaign")
	b.screenshot("list.png")
	// A filter on another state does not list it: the filter is applied.
	b.open(list(`CampaignState="paused"`))
	b.waitText(`an empty list under the filter CampaignState="paused"`, bodyText, `"paused"`, "No Results")
	text := b.eval(bodyText)
	assert.NotContains(t, text, id, "the campaign is listed under CampaignState=\"paused\":\n%s", text)

	// Its page, from the link the starter printed: the input.
	b.open(link)
	b.waitText("the workflow's page with its input", bodyText, id, "Campaign", "drover-campaign",
		`"per_host_delay": "300ms"`, `"fail_after": "5m0s"`)
	b.screenshot("input.png")

	// User Metadata: the summary and details that the starter set at the
	// start, and the current details that the workflow keeps up to date;
	// each is markdown rendered in a same-origin iframe.
	b.click("#user-metadata-tab")
	frames := `[...document.querySelectorAll('iframe')].map(f => f.contentDocument?.body?.innerText ?? '').join('\n')`
	b.waitText("the summary, details and current details", frames,
		"crawl of "+web.Seeds()[0]+", "+web.Seeds()[1]+" with 2 fetchers", // summary (cli.Summary)
		"Crawl campaign "+id, "1 at a time, 300ms between starts", // details (cli.Details)
		"Campaign "+id+": running", "fetchers: 2 active of 2 desired", "seeds: "+web.Seeds()[0]) // current details (workflows/details.go)
	b.waitText("the headings", bodyText, "Summary", "Details", "Current Details")
	b.screenshot("user-metadata.png")

	// Search Attributes.
	b.click("#search-attributes-tab")
	b.waitText("CampaignState running in the search attributes", bodyText, `"CampaignState": "running"`, `"PagesFetched":`)
	b.screenshot("search-attributes.png")
	t.Logf("screenshots of the Web UI: %s", b.dir)
}

// chromium finds Debian's chromium (DROVER_CHROMIUM overrides). Without one
// the test skips, except in CI, where .ci/run installs it.
func chromium(t *testing.T) string {
	t.Helper()
	testenv.NeedsBrowser(t)
	if p := os.Getenv("DROVER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (apt-get install chromium; .ci/run installs it)"
	if os.Getenv("CI") != "" {
		require.FailNow(t, msg)
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium tab; every wait is bounded by uiWait.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string // where screenshots go
}

func newBrowser(t *testing.T, path string) *browser {
	t.Helper()
	profile, err := os.MkdirTemp("", "drover-chromium-")
	require.NoError(t, err)
	// The flags the development machines need: no sandbox as root, and no
	// background connections (the network is closed; they fail by the
	// dozen) on a new, empty profile.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.UserDataDir(profile),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-component-update", true),
		chromedp.WindowSize(1400, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		os.RemoveAll(profile)
	})
	// The first action on ctx itself starts the browser (one on a context
	// derived from it would close the browser with that context); cancel
	// bounds it.
	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }()
	select {
	case err := <-started:
		require.NoError(t, err, "starting %s", path)
	case <-time.After(uiWait):
		cancel()
		require.FailNowf(t, "the browser did not start", "starting %s: no answer within %s", path, uiWait)
	}
	b := &browser{t: t, ctx: ctx, dir: outDir(t, "webui")}
	t.Cleanup(func() {
		if t.Failed() {
			b.screenshot("failed.png")
			t.Logf("the Web UI when the test failed: %s", filepath.Join(b.dir, "failed.png"))
		}
	})
	return b
}

func (b *browser) bounded() (context.Context, context.CancelFunc) {
	return context.WithTimeout(b.ctx, uiWait)
}

func (b *browser) open(u string) {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, chromedp.Navigate(u)), "open %s", u)
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	require.NoError(b.t, err, "evaluate %s", expr)
	return v
}

// waitText polls the text expr evaluates to (the page's, or its frames')
// until it holds every one of wants, for at most uiWait.
func (b *browser) waitText(what, expr string, wants ...string) {
	b.t.Helper()
	await.For(b.t, uiWait, 250*time.Millisecond, "the Web UI to show "+what, func() error {
		text := b.eval(expr)
		var missing []string
		for _, w := range wants {
			if !strings.Contains(text, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("missing %q; it shows:\n%s", missing, text)
		}
		return nil
	})
}

func (b *browser) click(sel string) {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	require.NoError(b.t, chromedp.Do(ctx, chromedp.Click(chromedp.CSS(sel))), "click %s", sel)
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	ctx, cancel := b.bounded()
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join(b.dir, name), png, 0o644)
	}
	assert.NoError(b.t, err, "screenshot %s", name)
}

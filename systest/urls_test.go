package systest_test

// `starter urls` against the test web's own log. While every page body is
// held half-sent, the URLs a host has leased are exactly the pages the
// server is serving it, those it holds were never requested, and the rest
// of its seeds are queued, never requested either; once the
// crawl ended, its failed URLs are exactly those the server answered 404.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/node"
	"github.com/drover-crawl/drover/node/nodetest"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// urlsGone is how many URLs of each host the seed list adds that the
// server answers 404.
const urlsGone = 25

func TestURLsAgreeWithTheServer(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 80, NoExtras: true, Base: 148})
	// A scheduler that holds a few URLs per shard, one URL a message, so
	// that most of each host's seeds wait in RabbitMQ.
	sc := frontier.DefaultServerConfig()
	sc.Prefetch, sc.Batch = 16, 1
	s := withWorkers(t, &stack{services: startServices(t), sched: nodetest.StartScheduler(t, node.SchedulerConfig{Server: sc, SeenPath: filepath.Join(t.TempDir(), "seen")})})
	starter := starterRunner(t, s.services, []string{s.sched.Addr()})
	seeds := web.Pages()
	for _, h := range web.Hosts() {
		for i := range urlsGone {
			seeds = append(seeds, fmt.Sprintf("http://%s/gone/%d.html", h, i))
		}
	}
	list := filepath.Join(t.TempDir(), "seeds.txt")
	require.NoError(t, os.WriteFile(list, []byte(strings.Join(seeds, "\n")), 0o644))
	web.HoldBodies()
	t.Cleanup(web.ReleaseBodies)
	id := fmt.Sprintf("urls-%d", time.Now().UnixNano())
	const conc = 4
	out, err := starter(time.Minute, "start", "--id", id, "--seeds-file", list, "--fetchers", "1",
		"--per-host-concurrency", fmt.Sprint(conc), "--per-host-delay", "50ms", "--allow-private", "--no-preflight",
		"--sink", "kafka://"+s.kafka.Addr()+"/"+s.topic)
	require.NoError(t, err, "start:\n%s", out)
	// Every host at its concurrency, each request held in its body.
	await.For(t, 2*time.Minute, 20*time.Millisecond, "every host's requests held", func() error {
		if n := web.Held(); n < conc*len(web.Hosts()) {
			return fmt.Errorf("%d held", n)
		}
		return nil
	})
	list2 := func(host, state string, limit int) []string {
		var all []string
		after := ""
		for range 100 {
			args := []string{"urls", id, "--host", host, "--state", state, "--limit", fmt.Sprint(limit), "--json"}
			if after != "" {
				args = append(args, "--after", after)
			}
			out, err := starter(time.Minute, args...)
			require.NoError(t, err, "urls %v:\n%s", args, out)
			var page session.URLPage
			require.NoError(t, json.Unmarshal([]byte(out), &page), "urls --json:\n%s", out)
			all = append(all, page.URLs...)
			if page.Next == "" {
				return all
			}
			after = page.Next
		}
		require.FailNowf(t, "too many pages of URLs", "urls %s %s: more than 100 pages", host, state)
		return nil
	}
	for i, ip := range web.IPs() {
		prefix := "http://" + web.Hosts()[i] + "/"
		var serving []string
		for _, r := range web.Requests() {
			if r.Status == 200 && strings.HasPrefix(r.URL, prefix) && !strings.HasSuffix(r.URL, "/robots.txt") {
				serving = append(serving, r.URL)
			}
		}
		slices.Sort(serving)
		leased := list2(ip, "leased", 3)
		assert.Equal(t, serving, leased, "host %s: leased, against what the server is serving", ip)
		held := list2(ip, "held", 7)
		assert.NotEmpty(t, held, "host %s: held no URL", ip)
		assert.Equal(t, len(held), len(slices.Compact(slices.Clone(held))), "host %s: held %d URLs, with duplicates: %v", ip, len(held), held)
		for _, u := range held {
			assert.Zero(t, web.Count(u), "host %s: %s is held, but the server saw it", ip, u)
			assert.True(t, strings.HasPrefix(u, prefix), "host %s: %s is held, but it is another host's", ip, u)
		}
		// Nothing is recorded while the bodies are held, so the host's
		// seeds are each exactly one of leased, held and queued; the queued
		// ones the server never saw.
		queued := list2(ip, "queued", 9)
		var want []string
		for _, u := range seeds {
			if strings.HasPrefix(u, prefix) && !slices.Contains(leased, u) && !slices.Contains(held, u) {
				want = append(want, u)
			}
		}
		slices.Sort(want)
		assert.NotEmpty(t, queued, "host %s: queued no URL", ip)
		assert.Equal(t, want, queued, "host %s: queued %d URLs, want the %d seeds neither leased nor held", ip, len(queued), len(want))
		for _, u := range queued {
			assert.Zero(t, web.Count(u), "host %s: %s is queued, but the server saw it", ip, u)
		}
		t.Logf("host %s during the crawl: %d leased (the server serves %d), %d held, %d queued", ip, len(leased), len(serving), len(held), len(queued))
	}
	// Done URLs come from the crawl log, which this campaign does not keep.
	if out, err := starter(time.Minute, "urls", id, "--host", web.IPs()[0], "--state", "done"); assert.Error(t, err, "urls --state done without a crawl log: want an error saying so: %s", out) {
		assert.Contains(t, out, "keeps no crawl log", "urls --state done without a crawl log: want an error saying so")
	}

	web.ReleaseBodies()
	await.For(t, 5*time.Minute, 200*time.Millisecond, "the campaign's end", func() error {
		st, err := ctQueryStatus(t, s.temporal.Client(), id)
		if err != nil || st.State != campaign.StateCompleted {
			return fmt.Errorf("state %q, %v", st.State, err)
		}
		return nil
	})
	notFound := web.Answered(404)
	for i, ip := range web.IPs() {
		prefix := "http://" + web.Hosts()[i] + "/"
		var want []string
		for _, u := range notFound {
			if strings.HasPrefix(u, prefix) {
				want = append(want, u)
			}
		}
		slices.Sort(want)
		// Failed: what the server answered 404, and the links robots.txt
		// disallows, which the server never saw.
		var failed404 []string
		disallowed := 0
		for _, u := range list2(ip, "failed", 10) {
			switch {
			case web.Disallowed(u) && web.Count(u) == 0:
				disallowed++
			default:
				failed404 = append(failed404, u)
			}
		}
		assert.Len(t, want, urlsGone, "host %s after the crawl: the URLs the server answered 404", ip)
		assert.Equal(t, want, failed404, "host %s after the crawl: failed, against what the server answered 404", ip)
		t.Logf("host %s after the crawl: %d failed with a 404 (the server answered %d), %d disallowed by robots.txt", ip, len(failed404), len(want), disallowed)
	}
	if m := web.Missing(); len(m) > 0 {
		assert.Failf(t, "pages never requested", "%d pages never requested, such as %s", len(m), m[0])
	}
}

package frontier_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/session/sessiontest"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

func amqpURL() string {
	if u := os.Getenv("AMQP_URL"); u != "" {
		return u
	}
	return "amqp://guest:guest@127.0.0.1:5672/"
}

// scheduler is a scheduler under test, on a free loopback port.
type scheduler struct {
	srv  *frontier.Server
	addr string
	conn *amqp.Connection
}

func startScheduler(t *testing.T, cfg frontier.ServerConfig, store seen.Store) *scheduler {
	t.Helper()
	return startSchedulerWith(t, cfg, store, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// startReplicas starts n schedulers of one group (Name s0, s1, ...), each
// with its seen store in memory.
func startReplicas(t *testing.T, n int) []*scheduler {
	t.Helper()
	var scheds []*scheduler
	for i := range n {
		c := frontier.DefaultServerConfig()
		c.Name, c.Index, c.Replicas = fmt.Sprintf("s%d", i), i, n
		scheds = append(scheds, startScheduler(t, c, seen.NewMemory()))
	}
	return scheds
}

// addrsOf lists the schedulers' addresses, in order.
func addrsOf(scheds []*scheduler) []string {
	var addrs []string
	for _, s := range scheds {
		addrs = append(addrs, s.addr)
	}
	return addrs
}

func (s *scheduler) stop() {
	s.srv.Close()
	s.conn.Close()
}

// testCampaign is a campaign over the test web's seeds.
func testCampaign(t *testing.T, web *testweb.Web) campaign.Config {
	return newCampaign(t, fmt.Sprintf("t-%s-%d", t.Name(), rand.IntN(1e9)), web.Seeds(), 5*time.Millisecond)
}

// newCampaign is a valid campaign of private hosts with the given seeds and
// per-host delay, its sink never written.
func newCampaign(t *testing.T, id string, seeds []string, delay time.Duration) campaign.Config {
	t.Helper()
	cfg := campaign.Config{
		ID:           id,
		Seeds:        seeds,
		PerHostDelay: new(delay),
		AllowPrivate: true,
		Sinks:        []string{"warc:/unused"},
	}.WithDefaults()
	require.NoError(t, cfg.Validate())
	return cfg
}

// seed opens a control session to sched and seeds cfg's seeds.
func seed(t *testing.T, sched *scheduler, cfg campaign.Config) *session.Control {
	t.Helper()
	ctl, err := session.Client{Token: session.DevToken}.DialControl(context.Background(), sched.addr)
	require.NoError(t, err)
	// Registered before the fleet's, so it runs after the fleet stopped:
	// nothing of the campaign stays in RabbitMQ, even when the test fails.
	t.Cleanup(func() {
		ctl.CloseCampaign(context.Background(), cfg.ID, true)
		ctl.Close()
	})
	_, err = ctl.Seed(context.Background(), cfg, cfg.Seeds)
	require.NoError(t, err)
	return ctl
}

// fleet runs n fetchers against the schedulers until stopped.
func startFleet(t *testing.T, cfg campaign.Config, addrs []string, sk sink.Sink, n int) *sessiontest.Fleet {
	fl := sessiontest.NewFleet(t)
	for i := range n {
		f, err := fetch.New(cfg)
		require.NoError(t, err)
		fl.Go(i, addrs, cfg, activities.NewRunner(cfg, f, sk, i, "test").Run, func() { f.Close() })
	}
	return fl
}

// waitDrained polls the schedulers' stats until the frontier is drained as
// the Monitor activity defines it.
func waitDrained(t *testing.T, addrs []string, id string, within time.Duration) session.Stats {
	t.Helper()
	var prev *session.Stats
	var st session.Stats
	await.For(t, within, 300*time.Millisecond, "campaign "+id+" drained", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if st, err = (session.Client{Token: session.DevToken}).CampaignStats(ctx, addrs, id); err != nil || !st.Idle() {
			prev = nil
			return fmt.Errorf("stats %+v (%v)", st, err)
		}
		if prev == nil || prev.Acked != st.Acked || prev.Published != st.Published {
			prev = &st
			return fmt.Errorf("idle once, not yet twice: %+v", st)
		}
		return nil
	})
	return st
}

func checkCrawl(t *testing.T, web *testweb.Web, sk *sink.Memory, wantNoDup bool) {
	t.Helper()
	m := web.Missing()
	assert.Zero(t, len(m), "pages never requested, e.g. %v", m[:min(5, len(m))])
	assert.Empty(t, web.DisallowedHits(), "disallowed URLs requested")
	if wantNoDup {
		assert.Empty(t, web.Duplicates(), "URLs requested more than once")
	}
	stored := map[string]int{}
	for _, p := range sk.Pages() {
		stored[p.URL]++
	}
	for _, u := range web.Pages() {
		assert.NotZero(t, stored[u], "page %s never stored", u)
		if wantNoDup {
			assert.LessOrEqual(t, stored[u], 1, "page %s: times stored", u)
		}
	}
}

func TestCrawlCompletes(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 60, CrossHost: true, Base: 21})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	ctl, err := session.Client{Token: session.DevToken}.DialControl(context.Background(), sched.addr)
	require.NoError(t, err)
	defer ctl.Close()
	t.Cleanup(func() {
		session.Client{Token: session.DevToken}.ReleaseCampaign(context.Background(), []string{sched.addr}, cfg.ID)
	})
	n, err := ctl.Seed(context.Background(), cfg, cfg.Seeds)
	require.NoError(t, err, "seed")
	require.Equal(t, len(cfg.Seeds), n, "seed: URLs seeded")
	sk := sink.NewMemory()
	startFleet(t, cfg, []string{sched.addr}, sk, 3)
	st := waitDrained(t, []string{sched.addr}, cfg.ID, 2*time.Minute)
	checkCrawl(t, web, sk, true)
	t.Logf("frontier: %d fetched, %d published, %d duplicate deliveries, %d acked; disallowed: %d dropped at lease time, %d links never published", st.Fetched, st.Published, st.Duplicates, st.Acked, st.Disallowed, st.RobotsDropped)
	// One scheduler: a link being published by one outcome is not
	// published again by another, so every URL is queued once as a link:
	// each page but the seeds, and each disallowed URL (robots.txt is
	// applied when the URL's turn comes). Discovered counts those;
	// Published adds the URLs re-published to be tried later (a fetch that
	// timed out on a loaded machine is retried), which are not new links.
	want := st.Fetched - int64(len(cfg.Seeds)) + st.Disallowed
	assert.Equal(t, want, st.Discovered, "links published (%d pages, %d seeds, %d disallowed); %d duplicate deliveries; %d re-published", st.Fetched, len(cfg.Seeds), st.Disallowed, st.Duplicates, st.Published-st.Discovered)
	assert.Zero(t, st.Duplicates, "duplicate deliveries (%d links published, want %d)", st.Discovered, want)
	assert.Equal(t, int64(len(web.Pages())), st.Fetched, "pages fetched as the scheduler counted, the web served %d", len(web.Pages()))
	// The names checked below are the campaign's: they exist before the
	// close.
	checkTopology(t, sched.conn, cfg.ID, true)
	_, err = ctl.CloseCampaign(context.Background(), cfg.ID, true)
	require.NoError(t, err)
	// Nothing of the campaign stays in RabbitMQ.
	checkTopology(t, sched.conn, cfg.ID, false)
}

// checkTopology checks that every queue of campaign id's topology (its
// shard queues, its dead-letter queue, its parking queues) and every
// parking exchange exists (exists) or is gone (!exists). Each is declared
// passively on a channel of its own: RabbitMQ answers a missing one with
// 404 NOT_FOUND and closes the channel, and every later declare on that
// channel would fail whatever it asked about. Gone means exactly that 404;
// a success or any other error fails t.
func checkTopology(t *testing.T, conn *amqp.Connection, id string, exists bool) {
	t.Helper()
	topo := frontier.Topology{Campaign: id}
	type object struct {
		kind, name string
		declare    func(ch *amqp.Channel, name string) error
	}
	queue := func(ch *amqp.Channel, name string) error {
		_, err := ch.QueueDeclarePassive(name, true, false, false, false, nil)
		return err
	}
	exchange := func(ch *amqp.Channel, name string) error {
		return ch.ExchangeDeclarePassive(name, amqp.ExchangeFanout, true, false, false, false, nil)
	}
	var objects []object
	for i := range frontier.Shards {
		objects = append(objects, object{"shard queue", topo.Shard(i), queue})
	}
	objects = append(objects, object{"dead-letter queue", topo.Dead(), queue})
	for i := range frontier.ParkQueues() {
		objects = append(objects, object{"parking queue", topo.Park(i), queue}, object{"parking exchange", topo.Park(i), exchange})
	}
	for _, o := range objects {
		ch, err := conn.Channel()
		require.NoError(t, err, "open channel")
		err = o.declare(ch, o.name)
		ch.Close()
		var aerr *amqp.Error
		switch {
		case exists && err != nil:
			assert.Failf(t, "not declared", "%s %s: %v, want it declared", o.kind, o.name, err)
		case !exists && err == nil:
			assert.Failf(t, "still exists", "%s %s still exists", o.kind, o.name)
		case !exists && !(errors.As(err, &aerr) && aerr.Code == amqp.NotFound):
			assert.Failf(t, "not NOT_FOUND", "%s %s: %v, want %d NOT_FOUND", o.kind, o.name, err, amqp.NotFound)
		}
	}
}

// TestCalendarTrap: an endless calendar (every month links to the next and
// the previous) on the test web; with default settings the crawl completes
// and fetches at most a few hundred of its pages.
func TestCalendarTrap(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 2, PagesPerHost: 30, Calendar: true, Base: 22})
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := testCampaign(t, web)
	cfg.PerHostDelay = new(time.Millisecond)
	ctl := seed(t, sched, cfg)
	sk := sink.NewMemory()
	startFleet(t, cfg, []string{sched.addr}, sk, 2)
	waitDrained(t, []string{sched.addr}, cfg.ID, 3*time.Minute)
	checkCrawl(t, web, sk, true)
	calendar := 0
	for _, r := range web.Requests() {
		if strings.Contains(r.URL, "/calendar/") {
			calendar++
		}
	}
	t.Logf("calendar pages fetched: %d", calendar)
	assert.NotZero(t, calendar, "calendar pages fetched, want some and at most 300")
	assert.LessOrEqual(t, calendar, 300, "calendar pages fetched, want some and at most 300")
	ctl.CloseCampaign(context.Background(), cfg.ID, true)
}

// TestSitemaps: with the campaign's sitemaps option, pages that no page
// links to are found through the sitemap index robots.txt names; without
// it, they are not.
func TestSitemaps(t *testing.T) {
	testenv.NeedsRabbitMQ(t) // each case starts a scheduler: skip the test, not only its cases
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("sitemaps=%v", on), func(t *testing.T) {
			var mu sync.Mutex
			hits := map[string]int{}
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits[r.URL.Path]++
				mu.Unlock()
				switch {
				case r.URL.Path == "/robots.txt":
					fmt.Fprintf(w, "User-agent: *\nAllow: /\nSitemap: %s/sitemap-index.xml\n", srv.URL)
				case r.URL.Path == "/sitemap-index.xml":
					w.Header().Set("Content-Type", "application/xml")
					fmt.Fprintf(w, `<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap><loc>%s/sitemap-1.xml</loc></sitemap></sitemapindex>`, srv.URL)
				case r.URL.Path == "/sitemap-1.xml":
					w.Header().Set("Content-Type", "application/xml")
					fmt.Fprint(w, `<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">`)
					for i := range 5 {
						fmt.Fprintf(w, "<url><loc>%s/hidden/%d</loc></url>", srv.URL, i)
					}
					fmt.Fprint(w, `</urlset>`)
				default:
					w.Header().Set("Content-Type", "text/html")
					fmt.Fprint(w, "<html><body>no links here</body></html>")
				}
			}))
			defer srv.Close()
			sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
			cfg := campaign.Config{ID: fmt.Sprintf("t-sitemaps-%v-%d", on, rand.IntN(1e9)), Seeds: []string{srv.URL + "/"},
				PerHostDelay: new(time.Millisecond), AllowPrivate: true, Sitemaps: on, Sinks: []string{"warc:/unused"}}.WithDefaults()
			ctl := seed(t, sched, cfg)
			startFleet(t, cfg, []string{sched.addr}, sink.NewMemory(), 1)
			waitDrained(t, []string{sched.addr}, cfg.ID, time.Minute)
			mu.Lock()
			defer mu.Unlock()
			for i := range 5 {
				p := fmt.Sprintf("/hidden/%d", i)
				if on {
					assert.Equal(t, 1, hits[p], "%s: times fetched", p)
				} else {
					assert.Zero(t, hits[p], "%s fetched without the sitemaps option", p)
				}
			}
			ctl.CloseCampaign(context.Background(), cfg.ID, true)
		})
	}
}

// TestSeedBurstPriority: a host seeded with many URLs keeps its priority
// for the first few only, so that its backlog does not sit ahead of the
// other hosts of its shard.
func TestSeedBurstPriority(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := campaign.Config{ID: fmt.Sprintf("t-burst-%d", rand.IntN(1e9)), Seeds: []string{"http://big.example/"}, Sinks: []string{"warc:/unused"}}.WithDefaults()
	var urls []string
	for i := range 100 {
		urls = append(urls, fmt.Sprintf("http://big.example/p/%d", i))
	}
	ctl, err := session.Client{Token: session.DevToken}.DialControl(context.Background(), sched.addr)
	require.NoError(t, err)
	defer ctl.Close()
	seeded, err := ctl.Seed(context.Background(), cfg, urls)
	require.NoError(t, err, "seed")
	require.Equal(t, 100, seeded, "URLs seeded")
	defer ctl.CloseCampaign(context.Background(), cfg.ID, true)
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	levels := map[uint8]int{}
	q := frontier.Topology{Campaign: cfg.ID}.Shard(frontier.ShardOf("big.example"))
	for {
		d, ok, err := ch.Get(q, true)
		require.NoError(t, err)
		if !ok {
			break
		}
		// Seeds are batched like links: a message of several URLs
		// says how many.
		n := 1
		if v, ok := d.Headers["x-drover-batch"].(int32); ok {
			n = int(v)
		}
		levels[d.Priority] += n
	}
	assert.Equal(t, 64, levels[frontier.MaxPriority], "priority levels of 100 seeds of one host: %v, at %d", levels, frontier.MaxPriority)
	assert.Equal(t, 36, levels[0], "priority levels of 100 seeds of one host: %v, at 0", levels)
}

// TestBackoffOn429: a 429 with Retry-After: 1 holds the whole host back for
// that second, and the URL is fetched again afterwards; nothing is lost.
func TestBackoffOn429(t *testing.T) {
	type hit struct {
		path string
		at   time.Time
	}
	var mu sync.Mutex
	var hits []hit
	limited := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, hit{r.URL.Path, time.Now()})
		first := r.URL.Path == "/a" && !limited
		if first {
			limited = true
		}
		mu.Unlock()
		switch {
		case r.URL.Path == "/robots.txt":
			fmt.Fprint(w, "User-agent: *\nAllow: /\n")
		case first:
			w.Header().Set("Retry-After", "1")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case r.URL.Path == "/":
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, `<html><body><a href="/a">a</a> <a href="/b">b</a> <a href="/c">c</a></body></html>`)
		default:
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, "<html><body>leaf</body></html>")
		}
	}))
	defer srv.Close()
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	cfg := campaign.Config{ID: fmt.Sprintf("t-429-%d", rand.IntN(1e9)), Seeds: []string{srv.URL + "/"},
		PerHostDelay: new(time.Millisecond), Priority: "bfs", AllowPrivate: true, Sinks: []string{"warc:/unused"}}.WithDefaults()
	ctl := seed(t, sched, cfg)
	sk := sink.NewMemory()
	startFleet(t, cfg, []string{sched.addr}, sk, 1)
	st := waitDrained(t, []string{sched.addr}, cfg.ID, 2*time.Minute)
	defer ctl.CloseCampaign(context.Background(), cfg.ID, true)
	mu.Lock()
	defer mu.Unlock()
	count := map[string]int{}
	var limitedAt time.Time
	for i, h := range hits {
		count[h.path]++
		if h.path == "/a" && limitedAt.IsZero() {
			limitedAt = h.at
			if i+1 < len(hits) {
				gap := hits[i+1].at.Sub(h.at)
				assert.GreaterOrEqual(t, gap, time.Second, "the request after the 429 came %s later, want Retry-After's 1s", gap)
			}
		}
	}
	assert.Equal(t, 2, count["/a"], "requests %v: want /a twice (429, then 200), /b and /c once", count)
	assert.Equal(t, 1, count["/b"], "requests %v: want /a twice (429, then 200), /b and /c once", count)
	assert.Equal(t, 1, count["/c"], "requests %v: want /a twice (429, then 200), /b and /c once", count)
	stored := map[string]int{}
	for _, p := range sk.Pages() {
		stored[p.URL]++
	}
	assert.Equal(t, 1, stored[srv.URL+"/a"], "/a: times stored (%d retries counted)", st.Retried)
	assert.Equal(t, int64(1), st.Retried, "retries counted (/a stored %d times)", stored[srv.URL+"/a"])
}

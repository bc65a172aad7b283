package frontier_test

// The failure paths of the ack chain: each test widens one
// window on purpose (a publisher that fails or waits on cue, a record held
// between its nacks, a channel broken under the scheduler) and counts
// what came back, so that a URL lost on that path fails it.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/drover-crawl/drover/activities"
	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/internal/await"
	"github.com/drover-crawl/drover/internal/testenv"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/sink"
	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/drover-crawl/drover/workflows"
)

// startSchedulerWith starts a scheduler with its own logger, over
// AMQP_URL's RabbitMQ: it skips the test under -short.
func startSchedulerWith(t *testing.T, cfg frontier.ServerConfig, store seen.Store, log *slog.Logger) *scheduler {
	t.Helper()
	testenv.NeedsRabbitMQ(t)
	conn, err := amqp.Dial(amqpURL())
	require.NoError(t, err, "RabbitMQ at %s", amqpURL())
	srv, err := frontier.NewServer(cfg, conn, store, log)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go srv.Serve(ln)
	s := &scheduler{srv: srv, addr: ln.Addr().String(), conn: conn}
	t.Cleanup(func() { s.stop() })
	return s
}

// handCampaign is a campaign over made-up hosts that no one fetches: a raw
// fetcher answers its leases by hand.
func handCampaign(t *testing.T, seeds ...string) campaign.Config {
	return newCampaign(t, fmt.Sprintf("h-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), rand.IntN(1e9)), seeds, time.Millisecond)
}

// seedHand seeds cfg through a control session to addr and dials a raw
// fetcher of cfg there.
func seedHand(t *testing.T, addr string, cfg campaign.Config) (*session.Control, *rawFetcher) {
	t.Helper()
	ctl := control(t, addr)
	seedCampaign(t, ctl, cfg)
	return ctl, dialRawFetcher(t, addr, cfg)
}

func (f *rawFetcher) report(t *testing.T, items ...session.Outcome) {
	t.Helper()
	writeRaw(t, f.c, jsonFrame(t, session.FrameOutcomes, session.Outcomes{Items: items}))
}

// pages gives credit and reads leases until want says it has what it
// needs; robots leases are answered at once with robots (nil: a 404,
// everything allowed), page leases are passed to want. It pings while it
// waits, so the session stays up.
func (f *rawFetcher) pages(t *testing.T, credit int, within time.Duration, robots *session.RobotsBody, want func(session.Lease) bool) {
	t.Helper()
	if robots == nil {
		robots = &session.RobotsBody{Status: 404}
	}
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: credit}))
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		for _, l := range readLeases(t, f, time.Until(deadline)) {
			if l.Kind == session.KindRobots {
				f.report(t, session.Outcome{LeaseID: l.ID, Robots: robots})
				writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
				continue
			}
			if want(l) {
				return
			}
		}
	}
	require.FailNowf(t, "leases not in time", "the leases wanted did not come within %s", within)
}

// faultOnShard fails (or holds) publishes to one shard queue of a campaign
// while armed.
type faultOnShard struct {
	queue string
	armed atomic.Int32 // publishes still to fail
	hold  chan struct{}
	held  chan struct{}
}

func (f *faultOnShard) fault(exchange, key string) error {
	if exchange != "" || key != f.queue || f.armed.Load() <= 0 {
		return nil
	}
	if f.armed.Add(-1) < 0 {
		return nil
	}
	if f.hold != nil {
		close(f.held)
		<-f.hold
	}
	return errors.New("injected publish failure")
}

func shardQueue(cfg campaign.Config, rawURL string) string {
	h, err := urlrule.HostKey(rawURL)
	if err != nil {
		panic(err)
	}
	return frontier.Topology{Campaign: cfg.ID}.Shard(frontier.ShardOf(h))
}

// Hole 1: a record that fails must not let its URL's own redelivery be
// acked as a duplicate of its entry still held. Two outcomes fail in one
// record; the record is held after its first nack until that URL, back
// from RabbitMQ, is leased again, and only then nacks the second. Both
// URLs must come back.
func TestHoleFailedRecordRedeliveryIsNotADuplicate(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	p1, p2 := "http://127.66.1.1:9/p1", "http://127.66.1.2:9/p2"
	cfg := handCampaign(t, p1, p2)
	child := "http://127.66.1.1:9/child"
	fault := &faultOnShard{queue: shardQueue(cfg, child)}
	ctl, f, got := leaseTwoThenArm(t, sched, cfg, fault)
	// Registered after the campaign's close (seedHand), so it runs
	// before: the close waits for the held record.
	nacked, release := make(chan struct{}), make(chan struct{})
	var hold, letGo sync.Once
	frontier.SetBetweenNacks(func(id string) {
		if id == cfg.ID {
			hold.Do(func() { close(nacked); <-release })
		}
	})
	t.Cleanup(func() {
		letGo.Do(func() { close(release) })
		frontier.SetBetweenNacks(nil)
	})
	// The record of both fails, and so does each half it is tried in
	// again (writeSplit): both outcomes go back.
	fault.armed.Store(3)
	links := []urlrule.Link{{URL: child}}
	f.report(t,
		session.Outcome{LeaseID: got[p1], Stored: true, Status: 200, Links: links},
		session.Outcome{LeaseID: got[p2], Stored: true, Status: 200, Links: links})
	select {
	case <-nacked:
	case <-time.After(20 * time.Second):
		require.FailNow(t, "the failed record never reached its second nack")
	}
	// The record is held between its nacks: the URL nacked first (p1 or
	// p2), redelivered, is the only one that can be leased now. Acked as
	// a duplicate instead, it never comes.
	again := map[string]bool{}
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
		again[l.URL] = true
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Links: links})
		return true
	})
	letGo.Do(func() { close(release) })
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
		again[l.URL] = true
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Links: links})
		return again[p1] && again[p2]
	})
	assert.Zero(t, stats(t, ctl, cfg.ID).Duplicates, "deliveries acked as duplicates after a failed record")
}

// A record that fails sends back only the outcomes the failure hit: n
// outcomes recorded together, one of whose links cannot be published (in
// every write that carries it, down to its own); the others are recorded
// when tried on their own, and their pages are not fetched again. Before,
// the whole batch went back to be fetched again. The failing outcome in
// the middle of 3 or 4 is where halves written into the batch's own
// slice once overwrote it: a failed URL left held, its redelivery then
// acked as a duplicate.
func TestRecordFailureSendsBackOnlyItsOutcomes(t *testing.T) {
	testenv.NeedsRabbitMQ(t) // each case starts a scheduler: skip the test, not only its cases
	for i, tc := range []struct{ n, bad, faults int }{
		{2, 0, 2}, // the batch, then the bad outcome alone
		{3, 1, 3}, // the batch, [bad, p3], [bad]
		{4, 1, 3}, // the batch, [p1, bad], [bad]
	} {
		t.Run(fmt.Sprintf("n%d-bad%d", tc.n, tc.bad+1), func(t *testing.T) {
			recordOneFailing(t, 14+i, tc.n, tc.bad, tc.faults)
		})
	}
}

// recordOneFailing reports n pages of the 127.66.net.x hosts in one frame,
// page bad linking to a URL whose publish fails faults times, each other
// page to a URL of another shard.
func recordOneFailing(t *testing.T, net, n, bad, faults int) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	var pages []string
	for i := range n {
		pages = append(pages, fmt.Sprintf("http://127.66.%d.%d:9/p", net, i+1))
	}
	cfg := handCampaign(t, pages...)
	badLink := fmt.Sprintf("http://127.66.%d.%d:9/bad", net, bad+1)
	links := map[string]string{} // page -> its link
	next := n + 1
	for i, p := range pages {
		if i == bad {
			links[p] = badLink
			continue
		}
		for ; ; next++ {
			l := fmt.Sprintf("http://127.66.%d.%d:9/good", net, next)
			if shardQueue(cfg, l) != shardQueue(cfg, badLink) {
				links[p], next = l, next+1
				break
			}
		}
	}
	fault := &faultOnShard{queue: shardQueue(cfg, badLink)}
	frontier.SetPublishFault(sched.srv, fault.fault)
	ctl, f := seedHand(t, sched.addr, cfg)
	got := map[string]uint64{}
	f.pages(t, 2*n, 20*time.Second, nil, func(l session.Lease) bool { got[l.URL] = l.ID; return len(got) == n })
	fault.armed.Store(int32(faults))
	var outs []session.Outcome
	for _, p := range pages {
		outs = append(outs, session.Outcome{LeaseID: got[p], Stored: true, Status: 200, Links: []urlrule.Link{{URL: links[p]}}})
	}
	f.report(t, outs...)
	leased := map[string]int{}
	f.pages(t, 2, 30*time.Second, nil, func(l session.Lease) bool {
		leased[l.URL]++
		var ls []urlrule.Link
		if l.URL == pages[bad] {
			ls = []urlrule.Link{{URL: badLink}}
		}
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Links: ls})
		writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
		for _, p := range pages {
			if leased[links[p]] != 1 {
				return false
			}
		}
		return true
	})
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "drained", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0
	})
	for i, p := range pages {
		want := 0
		if i == bad {
			want = 1 // its record failed
		}
		assert.Equal(t, want, leased[p], "page %d: times leased again", i+1)
	}
	// (Duplicate deliveries are expected: a link published by a write that
	// then failed, before its mark, is published again by the next; the
	// seen store absorbs them.)
	assert.Equal(t, int64(1), st.RecordFailed, "outcomes failed to record")
	assert.LessOrEqual(t, fault.armed.Load(), int32(0), "the injected failures did not all happen: left")
}

// Hole 2: a campaign's seen marks go with its queues on every scheduler:
// a second run of the same ID, after ReleaseCampaign, crawls the web again,
// whole, with two schedulers.
func TestHoleSeenMarksGoWithTheQueues(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 4, PagesPerHost: 15, CrossHost: true, Base: 61})
	addrs := addrsOf(startReplicas(t, 2))
	cfg := testCampaign(t, web)
	t.Cleanup(func() { session.Client{Token: session.DevToken}.ReleaseCampaign(context.Background(), addrs, cfg.ID) })
	for run := 1; run <= 2; run++ {
		web.Reset()
		ctl := control(t, addrs[0])
		n, err := ctl.Seed(context.Background(), cfg, cfg.Seeds)
		require.NoError(t, err, "run %d: seed", run)
		require.Equal(t, len(cfg.Seeds), n, "run %d: URLs seeded", run)
		sk := sink.NewMemory()
		fl := startFleet(t, cfg, addrs, sk, 2)
		waitDrained(t, addrs, cfg.ID, 2*time.Minute)
		fl.Stop()
		checkCrawl(t, web, sk, false)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		require.NoError(t, (session.Client{Token: session.DevToken}).ReleaseCampaign(ctx, addrs, cfg.ID), "run %d: release", run)
		cancel()
	}
}

// Hole 3: a publish that reaches no queue is an error, never a confirmed
// drop; a publish that closes the publisher's channel (an exchange deleted
// under it) does not break every later publish of the scheduler.
func TestHolePublisherSurvivesADeletedTopology(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	gone := fmt.Sprintf("drover.gone-%d", rand.IntN(1e9))
	assert.Error(t, frontier.Publish(sched.srv, "", gone+".s00"), "a publish to a queue that does not exist was confirmed")
	assert.Error(t, frontier.Publish(sched.srv, gone+".park.1s", gone+".s00"), "a publish to an exchange that does not exist was confirmed")
	// The scheduler still publishes: a new campaign seeds and crawls.
	cfg := handCampaign(t, "http://127.66.3.1:9/a")
	_, f := seedHand(t, sched.addr, cfg)
	child := "http://127.66.3.1:9/b"
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Links: []urlrule.Link{{URL: child}}})
		return l.URL == child
	})
}

// Hole 3, end to end: two schedulers share a campaign, and it is closed
// while both consume it; afterwards both still serve another campaign.
func TestHoleCloseWithTwoSchedulers(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 6, PagesPerHost: 20, CrossHost: true, Base: 62})
	addrs := addrsOf(startReplicas(t, 2))
	cfg := testCampaign(t, web)
	ctl := control(t, addrs[0])
	_, err := ctl.Seed(context.Background(), cfg, cfg.Seeds)
	require.NoError(t, err)
	sk := sink.NewMemory()
	fl := startFleet(t, cfg, addrs, sk, 4)
	// Close mid-crawl, with sessions on both schedulers.
	waitCrawling(t, addrs, cfg.ID, 10)
	checkTopology(t, addrsConn(t), cfg.ID, true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// What the workflow's Close activity does.
	acts := &activities.Activities{Schedulers: addrs, Token: session.DevToken}
	_, err = acts.Close(ctx, workflows.CloseInput{Config: cfg, Delete: true})
	require.NoError(t, err)
	fl.Stop()
	checkTopology(t, addrsConn(t), cfg.ID, false)
	// Each scheduler still publishes for another campaign.
	for i, addr := range addrs {
		c2 := handCampaign(t, fmt.Sprintf("http://127.66.4.%d:9/a", i+1))
		_, f := seedHand(t, addr, c2)
		child := fmt.Sprintf("http://127.66.4.%d:9/b", i+1)
		f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
			f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Links: []urlrule.Link{{URL: child}}})
			return l.URL == child
		})
	}
}

func addrsConn(t *testing.T) *amqp.Connection {
	testenv.NeedsRabbitMQ(t)
	conn, err := amqp.Dial(amqpURL())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return conn
}

// leaseTwoThenArm puts fault on sched's publisher, seeds cfg (two seed
// pages), leases both pages to a raw fetcher and arms the fault: the
// outcomes the test reports next meet it. got maps each page's URL to its
// lease ID.
func leaseTwoThenArm(t *testing.T, sched *scheduler, cfg campaign.Config, fault *faultOnShard) (*session.Control, *rawFetcher, map[string]uint64) {
	t.Helper()
	frontier.SetPublishFault(sched.srv, fault.fault)
	ctl, f := seedHand(t, sched.addr, cfg)
	got := map[string]uint64{}
	f.pages(t, 4, 20*time.Second, nil, func(l session.Lease) bool { got[l.URL] = l.ID; return len(got) == 2 })
	fault.armed.Store(1)
	return ctl, f, got
}

// reportBothAroundHold reports two pages that both link to link: the
// first, then, once held says the first one's record is held at its cue
// (what), the second.
func (f *rawFetcher) reportBothAroundHold(t *testing.T, first, second uint64, link string, held <-chan struct{}, what string) {
	t.Helper()
	links := []urlrule.Link{{URL: link}}
	f.report(t, session.Outcome{LeaseID: first, Stored: true, Status: 200, Links: links})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		require.FailNowf(t, "never came", "%s never came", what)
	}
	f.report(t, session.Outcome{LeaseID: second, Stored: true, Status: 200, Links: links})
}

// Hole 4: a parent is acked only once every link it found is confirmed,
// even when another outcome is publishing the same link: here that other
// publish fails, and the page that found it comes back as a 404.
func TestHoleParentAckWaitsForItsLinks(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	p1, p2 := "http://127.66.5.1:9/p1", "http://127.66.5.2:9/p2"
	cfg := handCampaign(t, p1, p2)
	link := "http://127.66.5.3:9/shared"
	fault := &faultOnShard{queue: shardQueue(cfg, link), hold: make(chan struct{}), held: make(chan struct{})}
	_, f, got := leaseTwoThenArm(t, sched, cfg, fault)
	f.reportBothAroundHold(t, got[p1], got[p2], link, fault.held, "the first publish of the link")
	// The second record runs while the first publish waits: nothing
	// signals its end, so it gets a window many times its length.
	time.Sleep(secondRecordWindow)
	close(fault.hold)
	// p1 comes back (its record failed) and is now a 404 without links;
	// the link must still come.
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 404})
		return l.URL == link
	})
}

// Hole 5: the sitemaps a robots.txt names are queued even when their first
// publish fails.
func TestHoleSitemapsSurviveAFailedPublish(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	seedURL := "http://127.66.6.1:9/"
	cfg := handCampaign(t, seedURL)
	cfg.Sitemaps = true
	sitemap := "http://127.66.6.1:9/sitemap.xml"
	fault := &faultOnShard{queue: shardQueue(cfg, sitemap)}
	frontier.SetPublishFault(sched.srv, fault.fault)
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	fault.armed.Store(1)
	f := dialRawFetcher(t, sched.addr, cfg)
	robots := &session.RobotsBody{Status: 200, Body: []byte("User-agent: *\nAllow: /\nSitemap: " + sitemap + "\n")}
	f.pages(t, 2, 30*time.Second, robots, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return l.URL == sitemap
	})
	assert.LessOrEqual(t, fault.armed.Load(), int32(0), "the injected failure never happened: left")
}

// Hole 6: after the consume channel is lost, an old lease's outcome must
// not settle or delete the new delivery of its URL: the campaign drains.
func TestHoleStaleLeaseAfterChannelLost(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u := "http://127.66.7.1:9/u"
	cfg := handCampaign(t, u)
	ctl, f := seedHand(t, sched.addr, cfg)
	var old uint64
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { old = l.ID; return true })
	frontier.BreakConsume(sched.srv, cfg.ID)
	// The held delivery was settled by the channel's loss and has come again.
	waitStats(t, ctl, cfg.ID, 15*time.Second, "redelivery after the channel loss", func(st session.Stats) bool {
		return st.Acked >= 1 && st.Held == 1 && st.Queued == 0
	})
	f.report(t, session.Outcome{LeaseID: old, Retry: true, Error: "connection reset", RetryAfter: time.Second})
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return l.URL == u
	})
	waitStats(t, ctl, cfg.ID, 15*time.Second, "drained", func(st session.Stats) bool {
		return st.Held == 0 && st.InFlight == 0 && st.Queued == 0 && st.Pending == 0
	})
}

// Hole 8: a shard queue deleted under the scheduler (RabbitMQ cancels the
// consumer) is consumed again once it exists again.
func TestHoleConsumerCancelledByTheBroker(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	first := "http://127.66.8.1:9/first"
	cfg := handCampaign(t, first)
	ctl, f := seedHand(t, sched.addr, cfg)
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	// A URL of another host, in another shard.
	var later string
	for i := 2; ; i++ {
		later = fmt.Sprintf("http://127.66.8.%d:9/later", i)
		if shardQueue(cfg, later) != shardQueue(cfg, first) {
			break
		}
	}
	ch, err := sched.conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDelete(shardQueue(cfg, later), false, false, false)
	require.NoError(t, err)
	ch.Close()
	// Seeding declares the queue again and publishes to it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seeded, err := ctl.Seed(ctx, cfg, []string{later})
	require.NoError(t, err, "seed")
	require.Equal(t, 1, seeded, "seed: URLs seeded")
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return l.URL == later
	})
}

// Hole 9a: outcomes too many for one frame are split, not lost with the
// session.
func TestHoleOutcomesSplitAcrossFrames(t *testing.T) {
	// The session's read deadlines are three keepalives. Encoding and
	// decoding 48 MiB of outcomes under -race on two loaded cores took
	// longer than the default 15 s, and the client's writer, busy with
	// them, sent no ping meanwhile: the session timed out (a flake seen
	// at load averages of 8-25). This test is about the split, not the
	// keepalive, so it gives the keepalive room.
	scfg := frontier.DefaultServerConfig()
	scfg.KeepAlive, scfg.LeaseTimeout = 30*time.Second, 2*time.Minute
	sched := startScheduler(t, scfg, seen.NewMemory())
	cfg := handCampaign(t, "http://127.66.9.1:9/")
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sess, err := session.Client{Token: session.DevToken}.DialSession(ctx, sched.addr, "big", cfg, 1)
	require.NoError(t, err)
	defer sess.Close()
	// 48 outcomes of about 1 MiB of links each, reported at once: more than
	// one frame (MaxFrame is 32 MiB) can carry. Their lease IDs are unknown
	// to the scheduler, which ignores them.
	links := make([]urlrule.Link, 8000)
	for i := range links {
		links[i] = urlrule.Link{URL: fmt.Sprintf("http://127.66.9.1:9/%0120d", i)}
	}
	for i := range 48 {
		sess.Report(session.Outcome{LeaseID: uint64(1<<40 + i), Stored: true, Status: 200, Links: links})
	}
	select {
	case <-sess.Done():
		require.FailNowf(t, "the session ended", "the session ended: %v", sess.Err())
	case <-time.After(5 * time.Second):
	}
	sess.Credit(1)
	select {
	case l := <-sess.Leases():
		require.NotEmpty(t, l.URL, "no lease: session ended: %v", sess.Err())
	case <-time.After(20 * time.Second):
		require.FailNowf(t, "no lease", "no lease after the big report: %v", sess.Err())
	}
}

// Hole 9b: max-pages-per-host counts pages, not leases: a host whose
// in-flight URLs fail does not end below its cap, and its other URLs are
// not dropped meanwhile.
func TestHolePerHostCapCountsPagesNotLeases(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u1, u2, u3 := "http://127.66.10.1:9/1", "http://127.66.10.1:9/2", "http://127.66.10.1:9/3"
	cfg := handCampaign(t, u1, u2, u3)
	cfg.MaxPagesPerHost, cfg.PerHostConcurrency, cfg.MaxAttempts = 2, 3, 1
	ctl, f := seedHand(t, sched.addr, cfg)
	var first []session.Lease
	f.pages(t, 3, 20*time.Second, nil, func(l session.Lease) bool { first = append(first, l); return len(first) == 2 })
	time.Sleep(thirdLeaseWindow) // let the third lease go out, if it would
	require.Zero(t, stats(t, ctl, cfg.ID).Skipped, "URLs dropped by the per-host cap with no page fetched yet")
	// The first fails for good (1 attempt), the second is a page: the
	// third must be fetched to reach the cap of 2 pages.
	f.report(t, session.Outcome{LeaseID: first[0].ID, Retry: true, Error: "503"}, session.Outcome{LeaseID: first[1].ID, Stored: true, Status: 200})
	var third string
	for _, u := range []string{u1, u2, u3} {
		if u != first[0].URL && u != first[1].URL {
			third = u
		}
	}
	f.pages(t, 2, 20*time.Second, nil, func(l session.Lease) bool {
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return l.URL == third
	})
}

// Hole 9c: max-pages counts pages, not leases: the campaign is not "capped"
// while its pages are only leased, and a lease that fails does not end it
// below its cap.
func TestHoleMaxPagesCountsPagesNotLeases(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	u1, u2, u3 := "http://127.66.11.1:9/", "http://127.66.11.2:9/", "http://127.66.11.3:9/"
	cfg := handCampaign(t, u1, u2, u3)
	cfg.MaxPages, cfg.MaxAttempts = 2, 1
	ctl, f := seedHand(t, sched.addr, cfg)
	var first []session.Lease
	f.pages(t, 6, 20*time.Second, nil, func(l session.Lease) bool { first = append(first, l); return len(first) == 2 })
	st := stats(t, ctl, cfg.ID)
	require.False(t, st.CapReached, "cap reported reached with %d pages fetched and %d failed", st.Fetched, st.Failed)
	f.report(t, session.Outcome{LeaseID: first[0].ID, Retry: true, Error: "503"}, session.Outcome{LeaseID: first[1].ID, Stored: true, Status: 200})
	var got []string
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool {
		got = append(got, l.URL)
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
		return true
	})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "cap reached at 2 pages", func(st session.Stats) bool {
		return st.CapReached && st.Fetched == 2
	})
}

// flakyStore fails one write in every n (MarkQueued, MarkDone), the way a
// disk that hiccups would.
type flakyStore struct {
	seen.Store
	n      int64
	writes atomic.Int64
	failed atomic.Int64
}

func (s *flakyStore) fail() error {
	if s.writes.Add(1)%s.n == 0 {
		s.failed.Add(1)
		return errors.New("injected seen-store failure")
	}
	return nil
}

func (s *flakyStore) MarkQueued(c string, keys []seen.Key) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.MarkQueued(c, keys)
}

func (s *flakyStore) MarkDone(c string, keys []seen.Key) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.Store.MarkDone(c, keys)
}

// The promise under faults: a 10,000-page crawl during which the publisher
// fails 1 publish in 50 and the seen store 1 write in 50 completes with
// every page fetched and stored, by the server's count. Duplicates are
// reported, not refused: a failed record fetches its URL again.
func TestCrawlUnderPublishAndStoreFaults(t *testing.T) {
	pages := 10_000
	web := webtest.Start(t, testweb.Config{Hosts: 20, PagesPerHost: pages / 20, CrossHost: true, Base: 63, NoExtras: true})
	store := &flakyStore{Store: seen.NewMemory(), n: 50}
	sched := startScheduler(t, frontier.DefaultServerConfig(), store)
	var publishes, pubFailed atomic.Int64
	frontier.SetPublishFault(sched.srv, func(exchange, key string) error {
		if publishes.Add(1)%50 == 0 {
			pubFailed.Add(1)
			return errors.New("injected publish failure")
		}
		return nil
	})
	cfg := testCampaign(t, web)
	cfg.PerHostDelay, cfg.PerHostConcurrency = new(time.Millisecond), 4
	seed(t, sched, cfg)
	sk := sink.NewMemory()
	startFleet(t, cfg, []string{sched.addr}, sk, 4)
	st := waitDrained(t, []string{sched.addr}, cfg.ID, 8*time.Minute)
	checkCrawl(t, web, sk, false)
	assert.Zero(t, st.DeadLettered, "URLs dead-lettered")
	dups := 0
	for _, n := range web.Duplicates() {
		dups += n - 1
	}
	t.Logf("%d pages: %d publishes failed of %d, %d seen-store writes failed of %d; %d records failed; %d duplicate fetches by the server's count, %d duplicate deliveries",
		len(web.Pages()), pubFailed.Load(), publishes.Load(), store.failed.Load(), store.writes.Load(), st.RecordFailed, dups, st.Duplicates)
	assert.NotZero(t, pubFailed.Load(), "no fault was injected: publishes failed")
	assert.NotZero(t, store.failed.Load(), "no fault was injected: seen-store writes failed")
	// A failed record is tried again in halves, down to single outcomes:
	// each outcome sent back took a fault of its own (before, one fault
	// sent back its whole batch: 1,300-1,474 records failed here).
	faults := pubFailed.Load() + store.failed.Load()
	assert.LessOrEqual(t, st.RecordFailed, faults, "outcomes failed to record for %d faults injected", faults)
}

// waitCrawling waits until the schedulers together counted more than n
// pages fetched (single-active-consumer may give every shard to one of
// them, so one alone may count none).
func waitCrawling(t *testing.T, addrs []string, id string, n int64) {
	t.Helper()
	await.For(t, 30*time.Second, 50*time.Millisecond, "the crawl under way", func() error {
		st, err := session.Client{Token: session.DevToken}.CampaignStats(context.Background(), addrs, id)
		if err == nil && st.Fetched <= n {
			err = fmt.Errorf("stats %+v", st)
		}
		return err
	})
}

// Negative windows: how long a test waits for something that must not
// happen, or that nothing signals.
const (
	// secondRecordWindow: nothing signals the end of the second
	// outcome's record, which is in-memory work while the first publish
	// is held; 300 ms is many times what it takes on an idle machine.
	secondRecordWindow = 300 * time.Millisecond
	// thirdLeaseWindow: a lease the per-host cap failed to hold back would
	// go out as soon as the fetcher's credit allows it, well within 200 ms.
	thirdLeaseWindow = 200 * time.Millisecond
)

// holdQueued holds the first Queued lookup that asks about key, after
// the lookup, until hold is closed.
type holdQueued struct {
	seen.Store
	key   seen.Key
	armed atomic.Bool
	held  chan struct{}
	hold  chan struct{}
}

func (s *holdQueued) Queued(c string, keys []seen.Key) ([]bool, error) {
	res, err := s.Store.Queued(c, keys)
	for _, k := range keys {
		if k == s.key && s.armed.CompareAndSwap(true, false) {
			close(s.held)
			<-s.hold
		}
	}
	return res, err
}

// Hole 6: a link that two records find is published once, even when the
// second record's publish of it starts and ends between the first one's
// seen-store lookup and its claim of the link.
func TestHoleLinkFoundTwicePublishedOnce(t *testing.T) {
	link := "http://127.66.12.3:9/shared"
	store := &holdQueued{Store: seen.NewMemory(), key: seen.KeyOf(link), held: make(chan struct{}), hold: make(chan struct{})}
	sched := startScheduler(t, frontier.DefaultServerConfig(), store)
	p1, p2 := "http://127.66.12.1:9/p1", "http://127.66.12.2:9/p2"
	cfg := handCampaign(t, p1, p2)
	ctl, f := seedHand(t, sched.addr, cfg)
	got := map[string]uint64{}
	f.pages(t, 4, 20*time.Second, nil, func(l session.Lease) bool { got[l.URL] = l.ID; return len(got) == 2 })
	store.armed.Store(true)
	f.reportBothAroundHold(t, got[p1], got[p2], link, store.held, "the first record's lookup of the link")
	waitStats(t, ctl, cfg.ID, 10*time.Second, "the second record published the link", func(st session.Stats) bool {
		return st.Discovered == 1 && st.Acked >= 1
	})
	close(store.hold)
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "both pages recorded", func(st session.Stats) bool {
		return st.Acked >= 2
	})
	assert.Equal(t, int64(1), st.Discovered, "times the link was published")
}

// holdLookups holds every Queued lookup that asks about one of keys until
// hold is closed; held is closed once n such lookups are waiting.
type holdLookups struct {
	seen.Store
	keys    map[seen.Key]bool
	n       int32
	waiting atomic.Int32
	held    chan struct{}
	hold    chan struct{}
}

func (s *holdLookups) Queued(c string, keys []seen.Key) ([]bool, error) {
	res, err := s.Store.Queued(c, keys)
	for _, k := range keys {
		if s.keys[k] {
			if s.waiting.Add(1) == s.n {
				close(s.held)
			}
			<-s.hold
			break
		}
	}
	return res, err
}

// twoRecordsHeldTwoQueued leases four pages, reports the first two with
// one link each and holds their records at their lookups (store), then
// reports the other two, in two frames, with links l3 and l4 on one host,
// and waits until the scheduler has taken every outcome: the last two
// wait for a record. It returns the scheduler, the campaign, its control,
// the store, the shard queue of l3 and l4 and a count of the publishes to
// it from then on.
func twoRecordsHeldTwoQueued(t *testing.T, l3, l4 string) (*scheduler, campaign.Config, *session.Control, *holdLookups, *atomic.Int32) {
	t.Helper()
	cfg := handCampaign(t, "http://127.66.13.1:9/p1", "http://127.66.13.2:9/p2", "http://127.66.13.3:9/p3", "http://127.66.13.4:9/p4")
	q := shardQueue(cfg, l3)
	// The held records' links live on other shards, so that every publish
	// to q after the hold is the waiting pages'.
	var l1, l2 string
	for i := 10; l2 == ""; i++ {
		u := fmt.Sprintf("http://127.66.13.%d:9/x", i)
		switch {
		case shardQueue(cfg, u) == q:
		case l1 == "":
			l1 = u
		default:
			l2 = u
		}
	}
	store := &holdLookups{Store: seen.NewMemory(), keys: map[seen.Key]bool{seen.KeyOf(l1): true, seen.KeyOf(l2): true},
		n: 2, held: make(chan struct{}), hold: make(chan struct{})}
	sched := startScheduler(t, frontier.DefaultServerConfig(), store)
	ctl, f := seedHand(t, sched.addr, cfg)
	got := map[string]uint64{}
	f.pages(t, 8, 20*time.Second, nil, func(l session.Lease) bool { got[l.URL] = l.ID; return len(got) == 4 })
	published := &atomic.Int32{}
	frontier.SetPublishFault(sched.srv, func(exchange, key string) error {
		if exchange == "" && key == q {
			published.Add(1)
		}
		return nil
	})
	f.report(t, session.Outcome{LeaseID: got[cfg.Seeds[0]], Stored: true, Status: 200, Links: []urlrule.Link{{URL: l1}}})
	f.report(t, session.Outcome{LeaseID: got[cfg.Seeds[1]], Stored: true, Status: 200, Links: []urlrule.Link{{URL: l2}}})
	select {
	case <-store.held:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the two records never reached their lookups")
	}
	f.report(t, session.Outcome{LeaseID: got[cfg.Seeds[2]], Stored: true, Status: 200, Links: []urlrule.Link{{URL: l3}}})
	f.report(t, session.Outcome{LeaseID: got[cfg.Seeds[3]], Stored: true, Status: 200, Links: []urlrule.Link{{URL: l4}}})
	waitStats(t, ctl, cfg.ID, 10*time.Second, "every outcome taken", func(st session.Stats) bool { return st.InFlight == 0 })
	return sched, cfg, ctl, store, published
}

// TestOutcomesWaitingForARecordShareIt: while two records run (held at
// their lookups), the outcomes of two more pages, in two frames, wait and
// go together in the next record: their links, on one host, share one
// message. Recorded one frame at a time, they took two.
func TestOutcomesWaitingForARecordShareIt(t *testing.T) {
	_, cfg, ctl, store, published := twoRecordsHeldTwoQueued(t, "http://127.66.13.9:9/a", "http://127.66.13.9:9/b")
	close(store.hold)
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "all four pages recorded", func(st session.Stats) bool {
		return st.Acked >= 4 && st.Discovered == 4
	})
	assert.Equal(t, int32(1), published.Load(), "messages the two waiting pages' links went in (stats %+v)", st)
}

// TestOutcomesWaitingForARecordAtClose: outcomes queued behind running
// records when the scheduler closes are recorded within the close's
// grace, as records already running are: their links are queued, not
// sent back to be fetched again.
func TestOutcomesWaitingForARecordAtClose(t *testing.T) {
	l3, l4 := "http://127.66.13.9:9/c", "http://127.66.13.9:9/d"
	sched, cfg, _, store, _ := twoRecordsHeldTwoQueued(t, l3, l4)
	closed := make(chan error, 1)
	go func() { closed <- sched.srv.Close() }()
	// Let the close reach the actor (stopping: no new goroutine) before
	// the held records end.
	time.Sleep(time.Second)
	close(store.hold)
	select {
	case err := <-closed:
		require.NoError(t, err, "close")
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the scheduler did not close")
	}
	queued, err := store.Store.Queued(cfg.ID, []seen.Key{seen.KeyOf(l3), seen.KeyOf(l4)})
	require.NoError(t, err)
	assert.True(t, queued[0], "links of the pages waiting at close queued: %v, want both", queued)
	assert.True(t, queued[1], "links of the pages waiting at close queued: %v, want both", queued)
}

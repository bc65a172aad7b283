package frontier_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fastHostWithin is how long the fast host's URL may take to be leased:
// the slow host's URLs ahead of it start one a second, so a window that
// held 64 of them would keep it out for over a minute.
const fastHostWithin = 20 * time.Second

// TestSlowHostLeavesItsShardToTheOthers: a host at Crawl-delay 1 s (4 at a
// time allowed), with 200 URLs queued ahead of a fast host's one in the
// same shard, must not fill the shard's prefetch window (64 messages)
// with URLs it will take minutes to start: the scheduler holds 30 s of
// them (the delay spaces every start, whatever the concurrency) and parks
// the rest, and the fast host's URL comes through within seconds.
func TestSlowHostLeavesItsShardToTheOthers(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	slow, fast := "127.66.21.1", ""
	for i := 2; i < 255 && fast == ""; i++ {
		if h := fmt.Sprintf("127.66.21.%d", i); frontier.ShardOf(h) == frontier.ShardOf(slow) {
			fast = h
		}
	}
	var seeds []string
	for i := range 200 {
		seeds = append(seeds, fmt.Sprintf("http://%s:9/p%d", slow, i))
	}
	fastURL := "http://" + fast + ":9/"
	cfg := handCampaign(t, append(seeds, fastURL)...)
	cfg.PerHostConcurrency = 4
	_, f := seedHand(t, sched.addr, cfg)
	robots := &session.RobotsBody{Status: 200, Body: []byte("User-agent: *\nCrawl-delay: 1\n")}
	writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 8}))
	slowLeased := 0
	deadline := time.Now().Add(fastHostWithin)
	for time.Now().Before(deadline) {
		for _, l := range readLeases(t, f, time.Until(deadline)) {
			o := session.Outcome{LeaseID: l.ID, Robots: robots}
			if l.Kind != session.KindRobots {
				if l.URL == fastURL {
					return
				}
				slowLeased++
				o = session.Outcome{LeaseID: l.ID, Stored: true, Status: 200}
			}
			f.report(t, o)
			writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
		}
	}
	require.FailNowf(t, "the fast host's URL was not leased", "the fast host's URL, queued behind 200 of a host at Crawl-delay 1 s in its shard, was not leased within %s (%d of the slow host's were)", fastHostWithin, slowLeased)
}

// TestParkedTogetherComeBackTogether: the URLs parked in one turn of the
// scheduler's loop, for one park queue and shard with the same counts,
// share a message; it comes back with their counts, which apply to each.
// Here two pages a sink refused are parked (a sink failure is not a fetch
// attempt) in one message, leased again, refused again, and both
// dead-lettered: MaxAttempts 2 is reached only if the first refusal came
// back counted.
func TestParkedTogetherComeBackTogether(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	p1, p2 := "http://127.66.22.1:9/a", "http://127.66.22.1:9/b"
	cfg := handCampaign(t, p1, p2)
	cfg.MaxAttempts = 2
	cfg.PerHostConcurrency = 2
	ctl, f := seedHand(t, sched.addr, cfg)
	refuse := func() session.Stats {
		got := map[string]uint64{}
		f.pages(t, 4, 20*time.Second, nil, func(l session.Lease) bool { got[l.URL] = l.ID; return len(got) == 2 })
		before := stats(t, ctl, cfg.ID)
		f.report(t,
			session.Outcome{LeaseID: got[p1], SinkFailed: true, RetryAfter: time.Second, Error: "sink down"},
			session.Outcome{LeaseID: got[p2], SinkFailed: true, RetryAfter: time.Second, Error: "sink down"})
		return before
	}
	before := refuse()
	st := waitStats(t, ctl, cfg.ID, 10*time.Second, "both pages parked", func(st session.Stats) bool {
		return st.Published-before.Published == 2
	})
	assert.Equal(t, int64(1), st.Messages-before.Messages, "messages two URLs parked together took")
	refuse()
	waitStats(t, ctl, cfg.ID, 10*time.Second, "both pages dead-lettered on their second refusal", func(st session.Stats) bool {
		return st.DeadLettered == 2
	})
}

package frontier_test

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two campaigns crawling one host on one scheduler share its politeness:
// any two of their leases of the host are its delay apart, and they take
// turns. Each campaign alone would lease at its own pace, twice as often.
func TestCampaignsShareAHostsClock(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const host = "http://127.66.74.1:9"
	const delay = 250 * time.Millisecond
	const each = 8
	type lease struct {
		at       time.Time
		campaign int
	}
	got := make(chan lease, 2*each)
	// The fetchers finish before the test returns: its cleanup closes
	// their connections, and a fetcher still writing its last credit
	// would fail on a closed connection.
	var wg sync.WaitGroup
	defer wg.Wait()
	for c := range 2 {
		var seeds []string
		for i := range each {
			seeds = append(seeds, fmt.Sprintf("%s/c%d/%d", host, c, i))
		}
		cfg := handCampaign(t, seeds...)
		cfg.ID = fmt.Sprintf("%s-%d", cfg.ID, c)
		cfg.PerHostDelay = new(delay)
		_, f := seedHand(t, sched.addr, cfg)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			f.pages(t, 1, time.Minute, nil, func(l session.Lease) bool {
				got <- lease{time.Now(), c}
				f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
				writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
				n++
				return n == each
			})
		}()
	}
	var ls []lease
	for range 2 * each {
		select {
		case l := <-got:
			ls = append(ls, l)
		case <-time.After(time.Minute):
			require.FailNowf(t, "leases missing", "%d leases of %d came", len(ls), 2*each)
		}
	}
	sort.Slice(ls, func(i, j int) bool { return ls[i].at.Before(ls[j].at) })
	// The first two leases may be robots.txt's answers' neighbours; from
	// the third on, both campaigns are waiting on the host.
	turns := 0
	for i := 1; i < len(ls); i++ {
		gap := ls[i].at.Sub(ls[i-1].at)
		assert.GreaterOrEqual(t, gap, delay-50*time.Millisecond, "leases %d (campaign %d) and %d (campaign %d) %s apart; the host's delay is %s",
			i-1, ls[i-1].campaign, i, ls[i].campaign, gap.Round(time.Millisecond), delay)
		if ls[i].campaign != ls[i-1].campaign {
			turns++
		}
	}
	assert.GreaterOrEqual(t, turns, len(ls)/2, "the campaigns changed turns %d times in %d leases: one went ahead of the other", turns, len(ls))
}

// A campaign with a delay_factor spaces a host's requests by its response
// time: once the server answers slowly, the next starts are factor times
// that apart, though the campaign's delay is a millisecond.
func TestAdaptiveDelay(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const host = "http://127.66.75.1:9"
	var seeds []string
	for i := range 6 {
		seeds = append(seeds, fmt.Sprintf("%s/p/%d", host, i))
	}
	cfg := handCampaign(t, seeds...)
	cfg.DelayFactor = 2
	_, f := seedHand(t, sched.addr, cfg)
	defer f.c.Close()
	latencies := []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, time.Second, time.Second, time.Second}
	var at []time.Time
	f.pages(t, 1, time.Minute, nil, func(l session.Lease) bool {
		at = append(at, time.Now())
		n := len(at) - 1
		f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200, Latency: latencies[min(n, len(latencies)-1)]})
		writeRaw(t, f.c, jsonFrame(t, session.FrameCredit, session.Credit{N: 1}))
		return len(at) == 5
	})
	for i := 1; i < len(at); i++ {
		gap, want := at[i].Sub(at[i-1]), 2*latencies[i-1]
		assert.GreaterOrEqual(t, gap, want-50*time.Millisecond, "lease %d came %s after the one that answered in %s; want at least %s (factor 2)",
			i, gap.Round(time.Millisecond), latencies[i-1], want)
		if latencies[i-1] < 100*time.Millisecond {
			assert.LessOrEqual(t, gap, time.Second, "lease %d came %s after a fast answer: the slow pace came early", i, gap.Round(time.Millisecond))
		}
	}
}

package frontier_test

import (
	"testing"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
	"github.com/stretchr/testify/assert"
)

// With --priority score, a host's URLs are leased highest score first: the
// scores given to seeds (campaign.Config.SeedScores; a seed not named has
// 0) and the scores the linking page gave its links (Link.Score, set by the
// fetcher's link scorer).
func TestScorePolicyLeasesHighestFirst(t *testing.T) {
	sched := startScheduler(t, frontier.DefaultServerConfig(), seen.NewMemory())
	const h = "http://127.66.30.1:9/"
	cfg := handCampaign(t, h+"a", h+"b", h+"c", h+"d")
	cfg.Priority = "score"
	cfg.SeedScores = map[string]float64{h + "a": 1, h + "b": 5, h + "c": 3} // d: 0
	ctl := control(t, sched.addr)
	seedCampaign(t, ctl, cfg)
	f := dialRawFetcher(t, sched.addr, cfg)
	waitStats(t, ctl, cfg.ID, 20*time.Second, "the seeds held", func(st session.Stats) bool { return st.Held == 4 })

	// The host's first page lease is its highest-scored seed. Its outcome
	// brings links scored above, between and below the other seeds.
	var got []string
	var first session.Lease
	f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool { first = l; return true })
	got = append(got, first.URL)
	assert.Equal(t, float64(5), first.Score, "lease of %s: score", first.URL)
	f.report(t, session.Outcome{LeaseID: first.ID, Stored: true, Status: 200, Links: []urlrule.Link{
		{URL: h + "x", Score: 2}, {URL: h + "y", Score: 9}, {URL: h + "z", Score: 4},
	}})
	// Every URL is held before the next credit, so the order is the
	// policy's, not the order of arrival.
	waitStats(t, ctl, cfg.ID, 20*time.Second, "the links held", func(st session.Stats) bool {
		return st.Held == 6 && st.InFlight == 0 && st.Pending == 0
	})
	for len(got) < 7 {
		f.pages(t, 1, 20*time.Second, nil, func(l session.Lease) bool {
			got = append(got, l.URL)
			f.report(t, session.Outcome{LeaseID: l.ID, Stored: true, Status: 200})
			return true
		})
	}
	want := []string{h + "b", h + "y", h + "z", h + "c", h + "x", h + "a", h + "d"}
	assert.Equal(t, want, got, "lease order")
}

package node_test

// Two campaigns crawl one host through one scheduler: the test web's
// server sees every two requests to the host at least the host's delay
// apart, whichever campaign made them, and the campaigns take turns.

import (
	"slices"
	"testing"
	"time"

	"github.com/drover-crawl/drover/testweb"
	"github.com/drover-crawl/drover/testweb/webtest"
)

func TestTwoCampaignsShareAHostsPoliteness(t *testing.T) {
	web := webtest.Start(t, testweb.Config{Hosts: 1, PagesPerHost: 12, NoExtras: true, Base: 144})
	s := startStack(t)
	const delay = time.Second
	var waits []func() // each campaign's wait for its end
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		cfg := s.newCampaign("shared", web, 1)
		cfg.PerHostDelay = new(delay)
		cfg.UserAgent = ua
		w := runCampaign(t, s.temporal.Client(), cfg, 3*time.Minute)
		waits = append(waits, func() { w() })
	}
	for _, w := range waits {
		w()
	}
	reqs, least, n := checkSharedClock(t, web, delay, "the host's")
	t.Logf("%d requests, the smallest gap %s; first half by campaign: %v", len(reqs), least.Round(time.Millisecond), n)
}

// checkSharedClock: the server saw every page from each of the campaigns
// drover-test-a and drover-test-b, every two requests at least delay
// apart (whose is named in the message, "the host's"), and each campaign
// made at least 40% of the first half of the requests, while both crawl.
// It returns the requests in order, the smallest gap and the first half's
// requests by campaign.
func checkSharedClock(t *testing.T, web *testweb.Web, delay time.Duration, whose string) ([]testweb.Request, time.Duration, map[string]int) {
	t.Helper()
	reqs := web.Requests()
	slices.SortFunc(reqs, func(a, b testweb.Request) int { return a.Start.Compare(b.Start) })
	if len(reqs) < 2*len(web.Pages()) {
		t.Fatalf("%d requests; want every page from each campaign (%d)", len(reqs), 2*len(web.Pages()))
	}
	least := time.Hour
	for i := 1; i < len(reqs); i++ {
		gap := reqs[i].Start.Sub(reqs[i-1].Start)
		least = min(least, gap)
		if gap < delay {
			t.Errorf("%s (%s) and %s (%s) %s apart at the server; %s delay is %s",
				reqs[i-1].URL, reqs[i-1].UA, reqs[i].URL, reqs[i].UA, gap.Round(time.Millisecond), whose, delay)
		}
	}
	half := reqs[:len(reqs)/2]
	n := map[string]int{}
	for _, r := range half {
		n[r.UA]++
	}
	for _, ua := range []string{"drover-test-a", "drover-test-b"} {
		if share := float64(n[ua]) / float64(len(half)); share < 0.4 {
			t.Errorf("campaign %s made %d of the first %d requests (%.0f%%): the other went ahead", ua, n[ua], len(half), 100*share)
		}
	}
	return reqs, least, n
}

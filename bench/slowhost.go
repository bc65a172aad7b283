package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/testweb"
)

// SlowHostResult is one run of the slow-host scenario (issue 3).
type SlowHostResult struct {
	Result
	WithSlow bool
	// Other: the pages of the other (fast) hosts, all of which the run
	// waits for; OtherSpan is the first request of the run (any host) to
	// the last request to a fast host, by the server's clock.
	OtherPages, OtherMissing int
	OtherSpan                time.Duration
	// The slow host: its URLs seeded, requests it got until the stop, and
	// the smallest gap between two of its request starts.
	SlowSeeded, SlowRequests int
	SlowMinGap               time.Duration // robots.txt included
	SlowMinPageGap           time.Duration // between pages only
	// SharedHosts: fast hosts in the slow host's shard queue (frontier
	// ShardOf); SharedSpan is the first request of the run to the last
	// request to one of them, the hosts that a head-of-line block in that
	// shard would delay.
	SharedHosts int
	SharedSpan  time.Duration
	// UnsharedSpan: the same for the fast hosts in other shards.
	UnsharedSpan time.Duration
}

// runSlowHost runs the slow-host scenario: the same fast web (SlowHosts
// hosts x SlowPages pages, SlowDelay per host) crawled (a) alone and (b)
// with one more host holding as many URLs as all of them together, every
// one of them seeded, behind robots.txt Crawl-delay SlowCrawlDelay. The slow
// host lives on a web of its own (its own loopback addresses), so that it
// can hold more pages than the others; no link crosses the two webs. Both
// runs stop the campaign (stop signal) as soon as every fast page was
// requested: the slow host alone would take pages x Crawl-delay, and only
// its effect on the others is measured.
func (o Options) runSlowHost(ctx context.Context) ([]SlowHostResult, error) {
	var out []SlowHostResult
	var errs []error
	for _, withSlow := range []bool{false, true} {
		res, err := o.slowHostRun(ctx, withSlow)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", res.Name, err))
			if res.Err == "" {
				res.Err = err.Error()
			}
		}
		out = append(out, res)
	}
	return out, errors.Join(errs...)
}

// slowBase is the slow host's web's second octet: its IP is 127.80.0.1.
const slowBase = 80

func (o Options) slowHostRun(ctx context.Context, withSlow bool) (SlowHostResult, error) {
	res := SlowHostResult{WithSlow: withSlow}
	res.Name = fmt.Sprintf("drover, fleet %d, %d hosts", o.SlowFleet, o.SlowHosts)
	if withSlow {
		res.Name += " + slow host"
	}
	fast, err := testweb.Start(testweb.Config{Hosts: o.SlowHosts, PagesPerHost: o.SlowPages, CrossHost: true, Base: 79})
	if err != nil {
		return res, err
	}
	defer fast.Close()
	seeds := fast.Seeds()
	var slow *testweb.Web
	if withSlow {
		slow, err = testweb.Start(testweb.Config{Hosts: 1, PagesPerHost: o.SlowHosts * o.SlowPages, Base: slowBase,
			CrawlDelay: map[int]time.Duration{0: o.SlowCrawlDelay}})
		if err != nil {
			return res, err
		}
		defer slow.Close()
		res.SlowSeeded = len(slow.Pages())
		seeds = append(seeds, slow.Pages()...)
	}
	j := Job{Kind: KindDrover, Seeds: seeds, Fleet: o.SlowFleet, PerHostConcurrency: o.PerHostConcurrency,
		PerHostDelay: o.SlowDelay, AMQPURL: o.AMQPURL, Timeout: o.Timeout}
	fmt.Fprintf(o.Log, "bench: %s (%d x %d fast pages, %d slow URLs seeded) ...\n", res.Name, o.SlowHosts, o.SlowPages, res.SlowSeeded)
	stop := make(chan struct{})
	watchDone, childDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watchDone)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-childDone:
				return
			case <-t.C:
				if len(fast.Missing()) == 0 {
					close(stop)
					return
				}
			}
		}
	}()
	child, err := o.childStop(ctx, j, stop)
	close(childDone)
	<-watchDone
	name := res.Name
	res.Result = child
	res.Name = name
	res.Kind = KindDrover
	reqs := fast.Requests()
	res.OtherMissing = len(fast.Missing())
	res.OtherPages = len(fast.Pages()) - res.OtherMissing
	for _, n := range fast.Duplicates() {
		res.Duplicates += n - 1
	}
	// The slow host's shard, whether or not it runs: the same fast hosts
	// are "shared" in both runs.
	slowShard := frontier.ShardOf(fmt.Sprintf("127.%d.0.1", slowBase))
	shared := map[string]bool{}
	for _, ip := range fast.IPs() {
		if frontier.ShardOf(ip) == slowShard {
			shared[ip] = true
		}
	}
	res.SharedHosts = len(shared)
	var first, last, lastShared, lastUnshared time.Time
	for _, r := range reqs {
		if first.IsZero() || r.Start.Before(first) {
			first = r.Start
		}
		if r.Start.After(last) {
			last = r.Start
		}
		h, _, _ := net.SplitHostPort(r.Host)
		if shared[h] && r.Start.After(lastShared) {
			lastShared = r.Start
		}
		if !shared[h] && r.Start.After(lastUnshared) {
			lastUnshared = r.Start
		}
	}
	if slow != nil {
		sr := slow.Requests()
		res.SlowRequests = len(sr)
		var all, pages []time.Time
		for _, r := range sr {
			if first.IsZero() || r.Start.Before(first) {
				first = r.Start
			}
			all = append(all, r.Start)
			if !strings.HasSuffix(r.URL, "/robots.txt") {
				pages = append(pages, r.Start)
			}
		}
		res.SlowMinGap, res.SlowMinPageGap = minGap(all), minGap(pages)
	}
	if !last.IsZero() {
		res.OtherSpan = last.Sub(first)
	}
	if !lastShared.IsZero() {
		res.SharedSpan = lastShared.Sub(first)
	}
	if !lastUnshared.IsZero() {
		res.UnsharedSpan = lastUnshared.Sub(first)
	}
	if err == nil && res.Err != "" {
		err = errors.New(res.Err)
	}
	if err == nil && res.OtherMissing > 0 {
		err = fmt.Errorf("%d fast pages never requested", res.OtherMissing)
	}
	fmt.Fprintf(o.Log, "bench: %s: fast pages %d in %s (missing %d; %d hosts in the slow host's shard done at %s, the others at %s), slow host %d requests, min gap %s (pages %s)\n",
		res.Name, res.OtherPages, res.OtherSpan.Round(time.Millisecond), res.OtherMissing, res.SharedHosts, res.SharedSpan.Round(time.Millisecond),
		res.UnsharedSpan.Round(time.Millisecond), res.SlowRequests, res.SlowMinGap.Round(time.Millisecond), res.SlowMinPageGap.Round(time.Millisecond))
	return res, err
}

// minGap is the smallest gap between two of ts (0 with fewer than two).
func minGap(ts []time.Time) time.Duration {
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	var g time.Duration
	for i := 1; i < len(ts); i++ {
		if d := ts[i].Sub(ts[i-1]); i == 1 || d < g {
			g = d
		}
	}
	return g
}

// SlowHostSlowdown is run (b)'s fast-page span over run (a)'s, minus one,
// in percent; ok is false unless both runs have a span.
func SlowHostSlowdown(rs []SlowHostResult) (pct float64, ok bool) {
	var a, b time.Duration
	for _, r := range rs {
		if r.WithSlow {
			b = r.OtherSpan
		} else {
			a = r.OtherSpan
		}
	}
	if a <= 0 || b <= 0 {
		return 0, false
	}
	return 100 * (b.Seconds()/a.Seconds() - 1), true
}

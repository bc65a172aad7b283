package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gocolly/colly/v2"
)

// collyConfig says how runColly sets Colly up, for the row's config column.
func collyConfig(j Job) string {
	if j.CollyPerHost {
		return fmt.Sprintf("colly v2.3.0 Async; one LimitRule per host{DomainGlob: IP:PORT, Parallelism: %d, Delay: %s}; IgnoreRobotsTxt=false; #fragments stripped; default transport",
			j.PerHostConcurrency, j.PerHostDelay)
	}
	return fmt.Sprintf("colly v2.3.0 Async; one LimitRule{DomainGlob: \"*\", Parallelism: %d, Delay: 0}; IgnoreRobotsTxt=false; AllowedDomains = the web's hosts; #fragments stripped before Visit; default transport",
		j.Parallelism)
}

// runColly crawls from the seeds with Colly v2 in async mode as its users
// tune it (issue 15): one global LimitRule (DomainGlob "*") whose
// Parallelism bounds the whole crawl, no delay, robots.txt obeyed (Colly
// ignores it unless told), the web's hosts allowed, every <a href> visited
// with its #fragment cut (Colly keeps fragments, so "page#section-3" would
// be a second visit of page), bodies counted and dropped.
func runColly(ctx context.Context, j Job) (Result, error) {
	if j.Parallelism < 1 && !j.CollyPerHost {
		return Result{}, fmt.Errorf("colly: parallelism %d", j.Parallelism)
	}
	c := colly.NewCollector(colly.Async(true), colly.AllowedDomains(j.Domains...))
	c.IgnoreRobotsTxt = false
	c.SetRequestTimeout(30 * time.Second)
	inFlight := j.Parallelism
	if j.CollyPerHost {
		for _, hp := range j.HostPorts {
			if err := c.Limit(&colly.LimitRule{DomainGlob: hp, Parallelism: j.PerHostConcurrency, Delay: j.PerHostDelay}); err != nil {
				return Result{}, fmt.Errorf("colly limit %s: %w", hp, err)
			}
		}
		inFlight = len(j.HostPorts) * j.PerHostConcurrency
	} else if err := c.Limit(&colly.LimitRule{DomainGlob: "*", Parallelism: j.Parallelism}); err != nil {
		return Result{}, fmt.Errorf("colly limit: %w", err)
	}
	var fetched, bytes, failed atomic.Int64
	c.OnResponse(func(r *colly.Response) {
		fetched.Add(1)
		bytes.Add(int64(len(r.Body)))
	})
	var firstErr atomic.Value
	c.OnError(func(r *colly.Response, err error) {
		// Colly reports a 404 as an error; the server answered, so it is a page.
		if r != nil && r.StatusCode != 0 {
			fetched.Add(1)
			return
		}
		// A redirect to a page already visited ends in this error: expected.
		var already *colly.AlreadyVisitedError
		if errors.As(err, &already) {
			return
		}
		failed.Add(1)
		if r == nil || r.Request == nil {
			firstErr.CompareAndSwap(nil, err.Error())
			return
		}
		firstErr.CompareAndSwap(nil, fmt.Sprintf("%s: %v", r.Request.URL, err))
	})
	c.OnHTML("a[href]", func(e *colly.HTMLElement) {
		href, _, _ := strings.Cut(e.Attr("href"), "#")
		_ = e.Request.Visit(href) // already visited, disallowed, out of scope: all expected
	})
	cpu0, _ := selfUsage()
	start := time.Now()
	for _, s := range j.Seeds {
		// A seed reached by a cross-host link of an earlier one is already
		// visited: expected.
		var already *colly.AlreadyVisitedError
		if err := c.Visit(s); err != nil && !errors.As(err, &already) {
			return Result{}, fmt.Errorf("colly visit %s: %w", s, err)
		}
	}
	done := make(chan struct{})
	go func() { c.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-time.After(j.Timeout):
		err = fmt.Errorf("colly: not done after %s", j.Timeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	wall := time.Since(start)
	cpu1, _ := selfUsage()
	if err == nil && failed.Load() > 0 {
		err = fmt.Errorf("colly: %d requests failed without a response, first %v", failed.Load(), firstErr.Load())
	}
	return Result{Wall: wall, Fetched: fetched.Load(), CPU: cpu1 - cpu0, InFlight: inFlight, Config: collyConfig(j)}, err
}

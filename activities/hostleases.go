package activities

import (
	"context"
	"time"

	"github.com/drover-crawl/drover/session"
)

// The leases that are no page: a host's robots.txt, and the address a
// host resolves to.

// handleRobots fetches a host's robots.txt for the scheduler.
func (r *Runner) handleRobots(ctx context.Context, l session.Lease) session.Outcome {
	o := session.Outcome{LeaseID: l.ID}
	start := time.Now()
	rr := r.f.FetchRobots(ctx, l.URL)
	done := time.Now()
	if ctx.Err() != nil {
		o.Released = true
		return o
	}
	r.m.robotsFetched(r.cfg.ID, rr)
	if !rr.Answered.IsZero() {
		// The server's response time, for an adaptive delay, as a page's.
		o.Latency = rr.Answered.Sub(start)
	}
	r.logLine(ctx, robotsLine(l.URL, rr, done.Sub(start)))
	o.Robots = &session.RobotsBody{Status: rr.Status, Body: rr.Body}
	if rr.Err != nil {
		o.Robots.Error = rr.Err.Error()
	}
	o.Reason, o.HostDown, o.IP = rr.Reason, rr.HostDown, rr.IP
	o.Took = since(rr.Answered, done) // robots.txt counts as a request for politeness
	return o
}

// handleResolve answers a resolve lease with the address a request to the
// host would go to: no request is made, no crawl log line written. A host
// that does not resolve reports the error and no IP; its robots.txt lease
// then fails the way a page's would.
func (r *Runner) handleResolve(ctx context.Context, l session.Lease) session.Outcome {
	o := session.Outcome{LeaseID: l.ID}
	ip, err := r.f.ResolveIP(ctx, l.URL)
	if ctx.Err() != nil {
		o.Released = true
		return o
	}
	if err != nil {
		o.Error = err.Error()
	}
	o.IP = ip
	return o
}

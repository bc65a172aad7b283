// Package fetch fetches one URL the way a careful operator wants it fetched:
// robots.txt, timeouts, a body cap, redirects recorded as pages, retries
// decided by the frontier, link discovery with goquery, and an address guard
// at dial time. The rules it applies to URLs (normalization, scope and trap
// guards, robots.txt parsing) are package urlrule's; the record it makes is
// package page's.
//
// The frontier decides what to fetch and when; this package only fetches,
// parses and judges. It never follows a redirect itself: the redirect is a
// page, and its target goes back through the frontier (so dedup applies).
package fetch

import (
	"time"

	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/urlrule"
)

// Request is one URL to fetch, as the scheduler leased it.
type Request struct {
	URL   string
	Depth int
	Hops  int // redirect hops that led here
	// Embeds is the embeds in a row that led here (urlrule.Link.Embeds):
	// 0 for a page that was linked.
	Embeds int
	Parent string
	// Path is the hop path from a seed (session.Lease.Path): the crawl
	// log's, never sent to the server.
	Path string
	// Score is the URL's score for the "score" priority policy; the link
	// scorer (ScoreLinks) sees it.
	Score float64
	// Attempt counts from 1; when Attempt == MaxAttempts a transient
	// failure is final and is returned as a Page with Err set.
	Attempt     int
	MaxAttempts int
	// Prior is the URL's last capture in the campaign's fetch history
	// (session.Lease.Prior): when it has a validator the request is
	// conditional, and a page found unchanged is a revisit of it.
	Prior *page.Capture
	// Robots, when set, is the host's robots.txt: Fetch refuses a URL it
	// disallows without sending anything (a permanent failure, ErrRobots).
	// It is the fetching process's state, never sent over the wire.
	Robots *urlrule.Robots `json:"-"`
}

// Result is what a Fetch produced.
type Result struct {
	// Page is non-nil when there is something to store: a page the server
	// answered (any status), or a permanent failure with Page.Err set. A
	// body over the spool threshold is in Page.BodyFile: the caller calls
	// Page.Release once the sinks are done with it.
	Page *page.Page
	// Links are the page's in-scope links, normalized, each once.
	Links []urlrule.Link
	// Retry asks the frontier to try the URL again later (network error,
	// 5xx, 429), after RetryAfter when the server said so.
	Retry      bool
	RetryAfter time.Duration
	// Status is the HTTP status of a response to retry (5xx, 429); 0 for a
	// network error. With 429 and 503 the scheduler slows the whole host.
	Status int
	// Err is the reason of a failure, transient or permanent.
	Err error
	// Answered is when the response head arrived (zero without a
	// response): the request had reached the server by then, so the
	// scheduler can space the host's next request from it.
	Answered time.Time
	// NoIndex is set when the page asks not to be indexed (meta robots or
	// X-Robots-Tag "noindex" or "none"); the page is still stored raw, and
	// consumers decide what indexing means.
	NoIndex bool
	// NoFollow is set when the page asks that its links not be followed
	// (meta robots or X-Robots-Tag "nofollow" or "none"): Links is empty.
	NoFollow bool
	// Reason classifies a failure in one word (a Reason* constant): set
	// with Err, and for a stored 4xx page or a redirect not followed;
	// empty for a page that is no failure and when ctx ended the fetch.
	Reason string
	// HostDown: the failure was at the connection level, before any byte
	// of a response (DNS, refused, connect or response-head timeout, TLS,
	// reset); it counts against the host, not the URL (Classify).
	HostDown bool
	// Capture is what the URL's fetch history keeps of this fetch (a 2xx
	// stored in full or a revisit); see session.Outcome.Capture.
	Capture *page.Capture
	// Unchanged is the revisit profile of a page found unchanged since
	// Request.Prior (Page.Revisit is set; Page.Body is empty).
	Unchanged string
	// IP is the address the request went to (Page.IP), also for a
	// response that is retried rather than stored; empty without one.
	IP string
}

// RobotsResult is the raw outcome of fetching a host's robots.txt; the
// scheduler parses it with ParseRobots and keeps it for the host.
type RobotsResult struct {
	Status int
	Body   []byte
	Err    error // network error: the host is treated as disallowed for a while
	// Answered: see Result.Answered.
	Answered time.Time
	// Reason and HostDown classify a failure that leaves the host's
	// robots.txt unreachable, as in Result (see FetchRobots).
	Reason   string
	HostDown bool
	// IP is the address the request (its last hop) went to; empty
	// without a response.
	IP string
}

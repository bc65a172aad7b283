package session

import (
	"context"
	"errors"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/failure"
)

// OpURL asks a scheduler where one URL of a campaign stands (Request.URLs
// holds it; Campaign.ID is the frontier key); Reply.URL answers.
const OpURL = "url"

// URL states, from a scheduler's view, most telling first (URLState.rank).
const (
	URLLeased  = "leased"  // a fetcher has it now
	URLHeld    = "held"    // the scheduler holds it, waiting for its host
	URLParked  = "parked"  // parked until ParkedUntil (a retry, a host far behind): its park message is with the scheduler's park mover
	URLFailed  = "failed"  // settled without a page, or with an error status: failure.Record says why
	URLDone    = "done"    // its outcome is recorded (a page stored)
	URLQueued  = "queued"  // published (a seed or a link) and not yet settled: in a shard queue, parked, or held by another scheduler
	URLEnded   = "ended"   // the run ended and its marks went with its queues: done, or never queued (a failure would say failed)
	URLUnknown = "unknown" // never queued for the campaign here
)

// URLState is where one URL stands on a scheduler.
type URLState struct {
	URL       string `json:"url"`
	State     string `json:"state"`
	Scheduler string `json:"scheduler,omitempty"`
	// Host is the URL's host; HostQueue the URLs its scheduler holds for
	// it, HostNext when its next request may start (held, leased).
	Host      string    `json:"host,omitempty"`
	HostQueue int       `json:"host_queue,omitempty"`
	HostNext  time.Time `json:"host_next,omitzero"`
	// LeaseDeadline: when a leased URL's lease ends unless reported.
	LeaseDeadline time.Time `json:"lease_deadline,omitzero"`
	// ParkedUntil: when a parked URL is due back in its shard (past, while
	// its move back is refused).
	ParkedUntil time.Time `json:"parked_until,omitzero"`
	// Attempt is the attempts made before its delivery (held, leased).
	Attempt int `json:"attempt,omitempty"`
	// Failure is its failure record (failed).
	Failure *failure.Record `json:"failure,omitempty"`
	// Last is what the campaign's fetch history holds of the URL's last
	// capture, from this run or an earlier one of its lineage, and, in a
	// continuous campaign, its next fetch; nil when it holds nothing.
	Last *LastFetch `json:"last_fetch,omitempty"`
}

// LastFetch is a URL's fetch history as `starter url` shows it.
type LastFetch struct {
	Lineage string    `json:"lineage"`
	Status  int       `json:"status"`
	Date    time.Time `json:"date"`
	Digest  string    `json:"digest,omitempty"`
	// Fetched is the URL's last fetch and NextDue its next, in a
	// continuous campaign (the scheduler's clock).
	Fetched time.Time `json:"fetched,omitzero"`
	NextDue time.Time `json:"next_due,omitzero"`
}

// rank orders states: the most telling one of several schedulers' answers
// is the URL's.
func (u URLState) rank() int {
	switch u.State {
	case URLLeased:
		return 7
	case URLHeld:
		return 6
	case URLParked:
		return 5
	case URLFailed:
		return 4
	case URLDone:
		return 3
	case URLQueued:
		return 2
	case URLEnded:
		return 1
	}
	return 0
}

// URLState asks this scheduler where raw stands in the campaign whose
// frontier key is key.
func (c *Control) URLState(ctx context.Context, key, raw string) (URLState, error) {
	rep, err := c.do(ctx, Request{Op: OpURL, Campaign: &campaign.Config{ID: key}, URLs: []string{raw}})
	if err != nil {
		return URLState{}, err
	}
	if rep.URL == nil {
		return URLState{}, errors.New("the scheduler answered no URL state (an older version?)")
	}
	return *rep.URL, nil
}

// URLState asks every scheduler and returns the most telling answer
// (leased, held, parked, failed, done, queued, unknown, in that order) with every
// error: an answer while a scheduler was unreachable may be less telling
// than the truth, and the error says so.
func (cl Client) URLState(ctx context.Context, addrs []string, key, raw string) (URLState, error) {
	states := make([]URLState, len(addrs))
	errs := cl.eachScheduler(ctx, addrs, func(i int, c *Control) (err error) {
		states[i], err = c.URLState(ctx, key, raw)
		return err
	})
	best := URLState{URL: raw, State: URLUnknown}
	for i, st := range states {
		// Of two answers alike, the one with the URL's history (its
		// host's scheduler's) says more.
		if errs[i] == nil && (st.rank() > best.rank() || (st.rank() == best.rank() && st.Last != nil && best.Last == nil)) {
			best = st
		}
	}
	return best, errors.Join(errs...)
}

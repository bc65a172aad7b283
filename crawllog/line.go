// Package crawllog is a campaign's crawl log, the archivist's audit trail:
// one JSON line per fetch attempt (robots.txt fetches, redirects, retries,
// failures and revisits included), written by the worker that made it,
// and where the page it stored went. It imports nothing but the standard
// library and package page, so that the starter reads it without the
// sinks' drivers.
package crawllog

import (
	"time"

	"github.com/drover-crawl/drover/page"
)

// Outcomes of a fetch attempt, Line.Outcome: what became of it.
const (
	// OutcomePage: a page the server answered (any status), stored in
	// every sink; Line.Stored says where.
	OutcomePage = "page"
	// OutcomeFailed: a permanent failure (Status 0: robots.txt forbade
	// the URL, the last attempt's network error, ...), stored as such.
	OutcomeFailed = "failed"
	// OutcomeRetry: a transient failure (network error, 5xx, 429); the
	// URL is tried again later, and has a line per attempt.
	OutcomeRetry = "retry"
	// OutcomeRobots: a host's robots.txt, fetched before its pages.
	OutcomeRobots = "robots"
	// OutcomeUnstored: the page was fetched but no sink stored it; the URL
	// is fetched again later, or dead-lettered (annotation
	// "dead-lettered") when a sink refused it for good.
	OutcomeUnstored = "unstored"
	// OutcomeDeadLettered: the scheduler moved the URL to the campaign's
	// dead-letter queue (Reason and Error say why); a line of the
	// scheduler's, not a fetch attempt: no request was sent for it.
	OutcomeDeadLettered = "dead-lettered"
	// OutcomeDropped: the scheduler settled the URL without a fetch, on
	// purpose: robots.txt forbids it, or an exclude matches it (Reason);
	// a line of the scheduler's, as OutcomeDeadLettered.
	OutcomeDropped = "dropped"
)

// Annotations, Line.Annotations: what else a reader should know of the
// attempt.
const (
	AnnotTruncated    = "truncated"     // the body hit the campaign's cap
	AnnotRevisit      = "revisit"       // stored as a revisit of an earlier capture (Line.Revisit says why)
	AnnotRobots       = "robots"        // robots.txt forbade the URL: no request was sent
	AnnotDeadLettered = "dead-lettered" // the scheduler dead-letters the URL
)

// Line is one fetch attempt. Its JSON is the crawl log's format.
type Line struct {
	// Time is when the attempt ended (its page stored, or its failure
	// known), UTC.
	Time time.Time `json:"ts"`
	// Outcome is one of the Outcome* constants.
	Outcome string `json:"outcome"`
	// Status is the HTTP status; 0 when there was no response.
	Status int `json:"status"`
	// Size is the body's bytes as the server sent them (Content-Encoding
	// kept): what the WARC record's payload holds; 0 for a revisit.
	Size int64  `json:"size"`
	URL  string `json:"url"`
	// Path is the hop path from a seed (L link, E embed, R redirect, P a
	// robots.txt; urlrule.Link.HopPath): empty for a seed.
	Path string `json:"path"`
	// Via is the page the URL was found on; empty for a seed and a
	// robots.txt.
	Via  string `json:"via,omitempty"`
	MIME string `json:"mime,omitempty"`
	// DurationMS is the fetch's duration, from the request's start to the
	// body's end, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
	// Digest is the payload digest (page.PayloadDigest), as the WARC
	// record's WARC-Payload-Digest; a revisit's is its earlier capture's.
	Digest string `json:"digest,omitempty"`
	// Attempt and MaxAttempts: this attempt's number, from 1, of those
	// the campaign allows.
	Attempt     int `json:"attempt,omitempty"`
	MaxAttempts int `json:"max_attempts,omitempty"`
	// Revisit is the revisit profile of a page stored as a revisit.
	Revisit     string   `json:"revisit,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
	// Reason and Error say why an attempt failed (a page.Reason* word, and
	// the error in words).
	Reason string `json:"reason,omitempty"`
	Error  string `json:"error,omitempty"`
	// Stored is where each sink stored the page.
	Stored []page.Location `json:"stored,omitempty"`
	// Worker is the worker process that wrote the line.
	Worker string `json:"worker,omitempty"`
}

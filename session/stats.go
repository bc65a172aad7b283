package session

import (
	"slices"
	"time"
)

// Stats is what a scheduler knows of one campaign. `starter status` and the
// workflow's drain check read it over a control session; several schedulers'
// stats add up with Add.
type Stats struct {
	Campaign   string   `json:"campaign"`
	Schedulers []string `json:"schedulers,omitempty"`
	// Queued: messages ready in the campaign's queues (shards, parking),
	// as RabbitMQ reports them.
	Queued int64 `json:"queued"`
	// DeadQueued: messages in the dead-letter queue.
	DeadQueued int64 `json:"dead_queued"`
	// Held: URLs this scheduler holds unacked (waiting for their host,
	// leased, or being recorded); a batch's message stays unacked until
	// its last URL is settled.
	Held int64 `json:"held"`
	// InFlight: leases handed to fetchers and not yet reported.
	InFlight int64 `json:"in_flight"`
	// Pending: publishes not yet confirmed by RabbitMQ.
	Pending int64 `json:"pending"`

	Fetched int64 `json:"fetched"` // pages stored (any status)
	// Unchanged: of those, pages stored as revisits of their last capture
	// (a run with campaign.Config.From).
	Unchanged  int64 `json:"unchanged,omitempty"`
	Failed     int64 `json:"failed"`     // permanent failures stored
	Retried    int64 `json:"retried"`    // URLs parked for a later attempt
	Disallowed int64 `json:"disallowed"` // URLs robots.txt forbade, dropped when their turn came
	// RobotsDropped: links robots.txt forbids, recorded instead of being
	// published (their host's robots.txt was known when they were found).
	RobotsDropped int64 `json:"robots_dropped,omitempty"`
	// SlotAsks: starts asked of the scheduler that owns an IP key's
	// clock (campaign.KeyIP), one round trip each.
	SlotAsks     int64 `json:"slot_asks,omitempty"`
	Duplicates   int64 `json:"duplicates"`    // deliveries dropped as already done or in flight
	DeadLettered int64 `json:"dead_lettered"` // URLs moved to the dead-letter queue
	Skipped      int64 `json:"skipped"`       // URLs dropped by max-pages-per-host
	Discovered   int64 `json:"discovered"`    // links published (confirmed)
	Published    int64 `json:"published"`     // all confirmed publishes, in URLs
	// Messages: the messages those publishes took (a batch of new links
	// is one message).
	Messages int64 `json:"messages,omitempty"`
	Acked    int64 `json:"acked"` // deliveries (messages) acked or nacked
	Hosts    int64 `json:"hosts"`
	Sessions int64 `json:"sessions"`
	// CapReached: the campaign's max-pages was reached; no more leases.
	CapReached bool `json:"cap_reached,omitempty"`
	// RecordFailed counts outcomes whose recording failed (a publish or the
	// seen store): their URLs went back to their queues.
	RecordFailed int64 `json:"record_failed,omitempty"`
	// AckFailed counts acks and nacks RabbitMQ did not take (their channel
	// was gone): each such URL comes back, a duplicate fetch at most.
	AckFailed int64 `json:"ack_failed,omitempty"`
	// ConsumeError says why the scheduler is not consuming the campaign's
	// queues while it should (it retries); empty when all is well.
	ConsumeError string `json:"consume_error,omitempty"`
	// Vanished names the campaign's shard queues that vanished from
	// RabbitMQ while it ran (deleted by hand, or lost with their node):
	// the URLs they held are lost. Each is declared again, empty, for the
	// links found later, and recorded as a failure (reason vanished).
	Vanished []string `json:"vanished,omitempty"`
	// HostsDown: hosts failed for the campaign (unreachable after their
	// retries); their URLs fail without a fetch.
	HostsDown int64 `json:"hosts_down,omitempty"`
	// HostsForgotten: hosts forgotten while idle (the scheduler's
	// HostIdle), counted in Hosts; a URL of one makes it again.
	HostsForgotten int64 `json:"hosts_forgotten,omitempty"`
	// FailedBy counts the URLs that did not become a page, and the pages
	// with an error status, by reason (dns, refused, timeout, tls, reset,
	// robots, 4xx, 5xx, sink, lost, ...). `starter failures` lists them.
	FailedBy map[string]int64 `json:"failed_by,omitempty"`

	// Uncounted: the campaign's queues whose count RabbitMQ could not
	// give (a quorum queue whose leader did not answer: RabbitMQ then says
	// 0 messages and 0 consumers, which drover checks). While any is
	// uncounted the frontier is not idle: what it holds is unknown, not
	// nothing.
	Uncounted int64 `json:"uncounted,omitempty"`
	// Consumers: how many schedulers consume the campaign's shards, as
	// RabbitMQ counts them (connections alive, whether or not they answer
	// a control session).
	Consumers int64 `json:"consumers,omitempty"`
	// Consuming: this scheduler consumes the campaign's shards; added up,
	// how many of the schedulers that answered do.
	Consuming bool  `json:"consuming,omitempty"`
	Answering int64 `json:"answering,omitempty"`
	// ParkedOwed: park messages this scheduler published that have not come
	// back to its shards yet. RabbitMQ counts a parked URL in its park
	// queue until its TTL ends, then in no queue while its dead-letter
	// hand-over to the shard is refused (a quorum shard without a leader
	// that answers), until RabbitMQ tries again; the frontier is not idle
	// meanwhile. Each is waited for its TTL and 10 minutes at most.
	ParkedOwed int64 `json:"parked_owed,omitempty"`
	// ParkedMoving: park messages this scheduler's park mover holds, taken
	// from their park queue (unacked there, so in none of RabbitMQ's
	// ready counts) until their wait ends and they are back in their
	// shard. The frontier is not idle while any mover holds one.
	ParkedMoving int64 `json:"parked_moving,omitempty"`
	// Missing lists the schedulers that did not answer (CampaignStats).
	Missing []string `json:"missing,omitempty"`

	// Continuous: the campaign revisits (campaign.Config.Revisit).
	// Scheduled counts the URLs its schedule holds for a later fetch, as
	// last counted, NextDue is when the first is due, and Revisited
	// counts the URLs released to be fetched again, Bumped those brought
	// forward by a sitemap's lastmod.
	Continuous bool  `json:"continuous,omitempty"`
	Scheduled  int64 `json:"scheduled,omitempty"`
	Revisited  int64 `json:"revisited,omitempty"`
	Bumped     int64 `json:"bumped,omitempty"`
	// ReleaseErrors counts the releases of due URLs that failed (RabbitMQ
	// refused or did not confirm the publish, or the store its write):
	// the URLs stay scheduled and go out on a later poll; the scheduler's
	// log says why.
	ReleaseErrors int64     `json:"release_errors,omitempty"`
	NextDue       time.Time `json:"next_due,omitzero"`
}

// Add accumulates o into s.
func (s *Stats) Add(o Stats) {
	s.Schedulers = append(s.Schedulers, o.Schedulers...)
	// Every scheduler reports the same RabbitMQ counts: take the largest.
	s.Queued = max(s.Queued, o.Queued)
	s.Consumers = max(s.Consumers, o.Consumers)
	s.Uncounted = max(s.Uncounted, o.Uncounted)
	if o.Consuming {
		s.Answering++
	}
	s.Missing = append(s.Missing, o.Missing...)
	s.DeadQueued = max(s.DeadQueued, o.DeadQueued)
	s.Held += o.Held
	s.InFlight += o.InFlight
	s.Pending += o.Pending
	s.ParkedOwed += o.ParkedOwed
	s.ParkedMoving += o.ParkedMoving
	s.Fetched += o.Fetched
	s.Unchanged += o.Unchanged
	s.Failed += o.Failed
	s.Retried += o.Retried
	s.Disallowed += o.Disallowed
	s.RobotsDropped += o.RobotsDropped
	s.SlotAsks += o.SlotAsks
	s.Duplicates += o.Duplicates
	s.DeadLettered += o.DeadLettered
	s.Skipped += o.Skipped
	s.Discovered += o.Discovered
	s.Published += o.Published
	s.Messages += o.Messages
	s.Acked += o.Acked
	s.Hosts += o.Hosts
	s.Sessions += o.Sessions
	s.CapReached = s.CapReached || o.CapReached
	s.RecordFailed += o.RecordFailed
	s.AckFailed += o.AckFailed
	s.HostsDown += o.HostsDown
	s.HostsForgotten += o.HostsForgotten
	s.Continuous = s.Continuous || o.Continuous
	s.Scheduled += o.Scheduled
	s.Revisited += o.Revisited
	s.Bumped += o.Bumped
	s.ReleaseErrors += o.ReleaseErrors
	if !o.NextDue.IsZero() && (s.NextDue.IsZero() || o.NextDue.Before(s.NextDue)) {
		s.NextDue = o.NextDue
	}
	for k, v := range o.FailedBy {
		if s.FailedBy == nil {
			s.FailedBy = map[string]int64{}
		}
		s.FailedBy[k] += v
	}
	for _, q := range o.Vanished {
		if !slices.Contains(s.Vanished, q) {
			s.Vanished = append(s.Vanished, q)
		}
	}
	if o.ConsumeError != "" {
		if s.ConsumeError != "" {
			s.ConsumeError += "; "
		}
		s.ConsumeError += o.ConsumeError
	}
}

// Idle reports whether nothing is queued, held, unconfirmed or parked and
// not back, every queue was counted, and every
// consumer of the campaign's shards is a scheduler that answered: the
// frontier is drained if this holds twice in a row with no ack or publish
// between.
//
// RabbitMQ's consumer count is what accounts for deliveries no answering
// scheduler counts. A scheduler whose connection was cut on its own side
// voids what it held and dials again at once, while RabbitMQ keeps the old
// connection, its consumers and its unacked deliveries until it notices
// the peer gone; a scheduler missing from the list asked (a rolling
// deploy), or alive but cut off from the control sessions, holds a
// consumer too. Each counts as busy until its consumers are gone. A dead
// scheduler's connection is gone, and RabbitMQ put its deliveries back in
// the queues (counted in Queued).
func (s Stats) Idle() bool {
	if s.Queued != 0 || s.Held != 0 || s.InFlight != 0 || s.Pending != 0 || s.Uncounted != 0 || s.ParkedOwed != 0 || s.ParkedMoving != 0 {
		return false
	}
	answering := s.Answering
	if s.Consuming {
		// One scheduler's own stats (a sum counts them in Answering).
		answering = max(answering, 1)
	}
	return s.Consumers <= answering
}

// Package activities holds the Campaign workflow's activities: the
// long-running FetchSession (one fetcher of the fleet), and the small ones
// the workflow needs (seed, monitor the frontier, close, notify).
//
// Activities are methods on Activities, which holds their dependencies;
// workflows refer to them through a nil *Activities.
package activities

import (
	"context"
	"crypto/tls"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier"
	"github.com/drover-crawl/drover/sink"
)

// Activities holds what the activities need from their worker process.
type Activities struct {
	// Schedulers are the scheduler addresses (DROVER_SCHEDULER); fetcher K
	// connects to Schedulers[K % len], then the next on failure.
	Schedulers []string
	// Token is the shared session token (DROVER_TOKEN).
	Token string
	// SessionTLS wraps the sessions to the schedulers in TLS (DROVER_TLS_CA,
	// see package tlsconf); nil is plaintext, refused beyond loopback
	// unless InsecurePlaintext.
	SessionTLS        *tls.Config
	InsecurePlaintext bool
	// SinkSecrets are the sinks' credentials from the worker's
	// environment (never from the campaign's config).
	SinkSecrets sink.Secrets
	// KafkaBrokers is the default Kafka (KAFKA_BROKERS) for sinks that name
	// none.
	KafkaBrokers string
	// Identity names this worker in the scheduler's logs.
	Identity string
	// DialControl opens a control session to a scheduler for Seed and
	// Close; nil means frontier.DialControl. Tests put a slow or failing
	// scheduler here.
	DialControl func(ctx context.Context, addr, token string) (ControlClient, error)
}

// ControlClient is what Seed and Close need of a scheduler's control
// session; *frontier.Control is one.
type ControlClient interface {
	Seed(ctx context.Context, cfg campaign.Config, urls []string) (int, error)
	CloseCampaign(ctx context.Context, id string, del bool) (frontier.Stats, error)
	Close() error
}

func (a *Activities) dialControl(ctx context.Context, addr string) (ControlClient, error) {
	if a.DialControl != nil {
		return a.DialControl(ctx, addr, a.Token)
	}
	return a.sessions().DialControl(ctx, addr)
}

// sessions is how this worker reaches its schedulers.
func (a *Activities) sessions() frontier.Client {
	return frontier.Client{Token: a.Token, TLS: a.SessionTLS, InsecurePlaintext: a.InsecurePlaintext}
}

// SeedInput is the input of Seed.
type SeedInput struct {
	Config campaign.Config
}

// SeedResult is the result of Seed.
type SeedResult struct {
	Seeded int
}

// FetchSessionInput is the input of FetchSession.
type FetchSessionInput struct {
	Config campaign.Config
	// Index is the fetcher's index in the fleet (0-based), stable across
	// restarts, so `restart --fetcher K` names it.
	Index int
}

// SessionCounters are a FetchSession's counters: its heartbeat details and
// its result. Counts are for this activity attempt.
type SessionCounters struct {
	Index     int       `json:"index"`
	Worker    string    `json:"worker"`
	Scheduler string    `json:"scheduler"`
	Fetched   int64     `json:"fetched"`
	Failed    int64     `json:"failed"`
	Errors    int64     `json:"errors"`
	InFlight  int       `json:"in_flight"`
	Since     time.Time `json:"since"`
}

// MonitorInput is the input of Monitor.
type MonitorInput struct {
	Config campaign.Config
	// Report: return after at most this long with the current stats, so the
	// workflow can update its counts (and the Web UI) now and then.
	Report time.Duration
}

// MonitorResult says why Monitor returned.
type MonitorResult struct {
	// Drained: nothing queued, held or in flight on any scheduler, twice in
	// a row with no publish or ack between.
	Drained bool
	// CapReached: max-pages reached.
	CapReached bool
	Stats      frontier.Stats
}

// CloseInput is the input of Close.
type CloseInput struct {
	Config campaign.Config
	// Delete removes the campaign's queues (the campaign ended).
	Delete bool
}

// CloseResult is the result of Close: the last stats before the queues went.
type CloseResult struct {
	Stats frontier.Stats
}

// NotifyInput is an exception notification.
type NotifyInput struct {
	URL      string
	Campaign string
	Event    string // "fetchers_failing", "fetcher_restarts", "error_rate", "completed", "failed", "stopped"
	Text     string
}

// Package activities holds the Campaign workflow's activities: the
// long-running FetchSession (one fetcher of the fleet), and the small ones
// the workflow needs (seed, monitor the frontier, close, notify).
//
// Activities are methods on Activities, which holds their dependencies;
// the workflow calls them by the names in workflows/names.go, under which
// the worker (temporalnode.StartWorkers) registers them.
package activities

import (
	"context"
	"crypto/tls"
	"sync"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/fetch"
	"github.com/drover-crawl/drover/session"
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
	// LinkScorer scores the links a fetcher finds, for the "score"
	// priority policy; nil is fetch.InheritScore (a link has its page's
	// score). Set it in the worker's main, as a scheduler's own policies.
	LinkScorer fetch.LinkScorer
	// DialControl opens a control session to a scheduler for Seed and
	// Close; nil means session.DialControl. Tests put a slow or failing
	// scheduler here.
	DialControl func(ctx context.Context, addr, token string) (ControlClient, error)
	// Metrics and SinkMetrics, when set, count the fetches and the sinks'
	// stores (WorkerMetrics makes them).
	Metrics     *Metrics
	SinkMetrics *sink.Metrics
	// Lookup, when set, answers the fetchers' host names instead of the
	// resolver (fetch.WithLookup), for tests and benchmarks only: host
	// names of a test domain onto a loopback listener.
	Lookup fetch.LookupFunc
	// SessionsRunning, when set, is told how many FetchSessions this
	// process runs, and of how many campaigns, each time one starts or
	// ends: the worker's main sets its memory limit from them
	// (envconf.WorkerMemoryLimit).
	SessionsRunning func(sessions, campaigns int)
	runMu           sync.Mutex
	running         map[string]int // sessions by campaign
}

// sessionRunning counts a FetchSession of campaign c that starts (+1) or
// ends (-1) and tells SessionsRunning, in the order of the counts.
func (a *Activities) sessionRunning(c string, delta int) {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.running == nil {
		a.running = map[string]int{}
	}
	if a.running[c] += delta; a.running[c] <= 0 {
		delete(a.running, c)
	}
	if a.SessionsRunning != nil {
		sessions := 0
		for _, n := range a.running {
			sessions += n
		}
		a.SessionsRunning(sessions, len(a.running))
	}
}

// ControlClient is what Seed and Close need of a scheduler's control
// session; *session.Control is one.
type ControlClient interface {
	Seed(ctx context.Context, cfg campaign.Config, urls []string) (int, error)
	AddSeeds(ctx context.Context, cfg campaign.Config, urls []string) (int, error)
	CloseCampaign(ctx context.Context, id string, del bool) (session.Stats, error)
	Close() error
}

func (a *Activities) dialControl(ctx context.Context, addr string) (ControlClient, error) {
	if a.DialControl != nil {
		return a.DialControl(ctx, addr, a.Token)
	}
	return a.sessions().DialControl(ctx, addr)
}

// sessions is how this worker reaches its schedulers.
func (a *Activities) sessions() session.Client {
	return session.Client{Token: a.Token, TLS: a.SessionTLS, InsecurePlaintext: a.InsecurePlaintext}
}

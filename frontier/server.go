package frontier

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// ServerConfig configures a scheduler.
type ServerConfig struct {
	// Name identifies the scheduler in stats and logs.
	Name  string
	Token string
	// QueueType is the shard queue type of a campaign that does not name
	// one (campaign.Config.QueueType): QueueClassic or QueueQuorum;
	// empty is classic. A campaign's queues keep the type they were
	// declared with, whatever a later scheduler's default.
	QueueType string
	// Index and Replicas: this scheduler is replica Index of Replicas; it
	// subscribes first to the shards i with i%Replicas == Index.
	Index, Replicas int
	// Prefetch bounds the URLs held per shard consumer: RabbitMQ's
	// prefetch counts messages, a batch being one, so the consumers take
	// Prefetch/Batch messages, and no fewer than min(Prefetch, 64) (see
	// prefetchMessages).
	Prefetch int
	// Batch: the new links a record publishes to one shard queue go up to
	// this many to a message (1: one URL per message, as before batches).
	// A scheduler reads both forms whatever its Batch. Seeds are batched
	// the same way, by priority level (seedBurst).
	Batch int
	// LeaseTimeout: a lease not reported (or renewed by the session's
	// keepalive) within it goes back to the pool.
	LeaseTimeout time.Duration
	// MaxLease: a lease is never renewed past this age (a fetcher that
	// pings but never reports).
	MaxLease  time.Duration
	KeepAlive time.Duration
	// IdleRelease: a campaign with no fetcher session for this long
	// releases its shards to a standby scheduler.
	IdleRelease time.Duration
	// RobotsTTL is how long a host's robots.txt is trusted: after it, the
	// host's next lease fetches it again, and until then its rules no
	// longer settle links.
	RobotsTTL time.Duration
	// Peers are the addresses of every scheduler (DROVER_SCHEDULER), and
	// Self this one's among them: the clock of an IP key is owned by one
	// of them (peers.go). Without Self, or without another peer, this
	// scheduler owns every IP key it meets. PeerTLS and
	// PeerInsecurePlaintext are how it dials the others (as a worker
	// does; Token is theirs too).
	Peers                 []string
	Self                  string
	PeerTLS               *tls.Config
	PeerInsecurePlaintext bool
	// Policies are priority policies of your own, by the name a campaign's
	// `--priority` gives, besides the built-in bfs, score and fair (a name
	// here wins). A campaign naming a policy the scheduler has not is
	// refused (ErrUnknownPolicy).
	Policies map[string]Policy
	// Clock is the time a continuous campaign's revisits are scheduled
	// and released by (revisit.go); nil is the wall clock. Tests run it
	// faster, to live days of a campaign in minutes.
	Clock func() time.Time
	// RevisitPoll is how often a continuous campaign's schedule is read
	// for the URLs due (and how far ahead it releases them).
	RevisitPoll time.Duration
	// QueuedCacheBytes is the memory of the links known to be queued,
	// answered without a seen-store lookup (seen.QueuedCache), shared by
	// every campaign; 0 keeps none, and every link is looked up.
	QueuedCacheBytes int64
	// HostIdle is how long a campaign keeps the state of a host that has
	// nothing held, leased or waiting, past its next allowed start: then
	// it forgets the host (its robots.txt rules, politeness and turn) and
	// keeps only its count of pages fetched, so that the hosts in memory
	// are the hosts active, not every host seen. A URL of a forgotten host
	// makes it again, and its robots.txt is fetched again first. 0
	// forgets a host at the first sweep after it went idle (sweeps run
	// every few seconds); negative never forgets one.
	HostIdle time.Duration
	// RecordBacklog bounds each campaign's outcomes reported and not yet
	// recorded, weighed as one for each outcome and one for each of its
	// links: past it the campaign grants no lease until records catch up
	// (each campaign on its own: N campaigns may hold N times it), so that
	// what waits on it (and its memory) is bounded when recording falls
	// behind fetching (every link new at a crawl's start, a slow
	// RabbitMQ). 0 grants none while any outcome waits.
	RecordBacklog int
}

// MaxQueuedCacheBytes bounds ServerConfig.QueuedCacheBytes: 16 GiB, two
// generations of 2^29 keys.
const MaxQueuedCacheBytes = 16 << 30

// DefaultHostIdle is ServerConfig.HostIdle's default: ten minutes, far
// longer than a server keeps an idle connection, and short beside a
// robots.txt's day.
const DefaultHostIdle = 10 * time.Minute

// DefaultRecordBacklog is ServerConfig.RecordBacklog's default: 32,768
// links, about 10 MB of records waiting (a link, its URL and a new link's
// message are 300 bytes or so). It does not bind while records keep up: at
// 4,000 pages a second of 40 links each, a record of 10 ms gathers under
// 2,000.
const DefaultRecordBacklog = 32768

// DefaultServerConfig returns the defaults.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		Name:          "scheduler",
		Token:         session.DevToken,
		Index:         0,
		Replicas:      1,
		Prefetch:      256,
		Batch:         DefaultBatch,
		LeaseTimeout:  time.Minute,
		MaxLease:      5 * time.Minute,
		KeepAlive:     5 * time.Second,
		IdleRelease:   30 * time.Second,
		RobotsTTL:     24 * time.Hour,
		RevisitPoll:   time.Second,
		HostIdle:      DefaultHostIdle,
		RecordBacklog: DefaultRecordBacklog,

		QueuedCacheBytes: seen.DefaultQueuedCacheBytes,
	}
}

// Validate checks the config; errors name the field and its range.
func (c ServerConfig) Validate() error {
	var errs []error
	if c.Token == "" {
		errs = append(errs, errors.New("token: must not be empty"))
	}
	if c.Replicas < 1 || c.Index < 0 || c.Index >= c.Replicas {
		errs = append(errs, fmt.Errorf("index %d of replicas %d: need 0 <= index < replicas", c.Index, c.Replicas))
	}
	if c.Prefetch < 1 || c.Prefetch > 65535 {
		errs = append(errs, fmt.Errorf("prefetch %d: must be between 1 and 65535", c.Prefetch))
	}
	if c.RecordBacklog < 0 {
		errs = append(errs, fmt.Errorf("record backlog %d: must be 0 or more", c.RecordBacklog))
	}
	if c.Batch < 1 || c.Batch > 1000 {
		errs = append(errs, fmt.Errorf("batch %d: must be between 1 and 1000", c.Batch))
	}
	if c.LeaseTimeout < time.Second || c.MaxLease < c.LeaseTimeout {
		errs = append(errs, fmt.Errorf("lease timeout %s / max lease %s: need 1s <= lease timeout <= max lease", c.LeaseTimeout, c.MaxLease))
	}
	if c.KeepAlive < 100*time.Millisecond || c.KeepAlive*3 > c.LeaseTimeout {
		errs = append(errs, fmt.Errorf("keepalive %s: must be at least 100ms and at most a third of the lease timeout", c.KeepAlive))
	}
	if c.Self != "" && len(c.Peers) > 0 && !slices.Contains(c.Peers, c.Self) {
		errs = append(errs, fmt.Errorf("self %q: must be one of the peers %q (DROVER_SCHEDULER), as the other schedulers dial it", c.Self, c.Peers))
	}
	if c.RevisitPoll < 10*time.Millisecond || c.RevisitPoll > time.Minute {
		errs = append(errs, fmt.Errorf("revisit poll %s: must be between 10ms and 1m", c.RevisitPoll))
	}
	if c.RobotsTTL < time.Second {
		errs = append(errs, fmt.Errorf("robots TTL %s: must be at least 1s", c.RobotsTTL))
	}
	if c.QueuedCacheBytes < 0 || c.QueuedCacheBytes > MaxQueuedCacheBytes {
		errs = append(errs, fmt.Errorf("queued cache bytes %d: must be between 0 (none) and %d", c.QueuedCacheBytes, int64(MaxQueuedCacheBytes)))
	}
	return errors.Join(errs...)
}

// Server is a scheduler: it serves sessions over TCP and leases URLs from
// the RabbitMQ frontier.
type Server struct {
	cfg   ServerConfig
	mq    *rabbit
	pub   *publisher
	store seen.Store
	log   *slog.Logger

	nextLease atomic.Uint64
	// clocks: the politeness clocks its campaigns share (clocks.go).
	clocks *hostClocks
	// places: the requests in flight under each politeness key, of
	// every campaign (keyshare.go).
	places *keyPlaces
	// peers: the other schedulers, owners of IP keys (peers.go); nil
	// when there are none.
	peers *peerSet
	// metrics: RegisterMetrics's hooks (metrics.go); nil without.
	metrics atomic.Pointer[schedMetrics]
	// robots: one parse of each robots.txt its hosts hold, whatever the
	// number of hosts (and campaigns) that serve the same file.
	robots urlrule.RobotsShare

	// createMu serializes creating actors (declares included); lock order:
	// createMu before mu.
	createMu  sync.Mutex
	mu        sync.Mutex
	campaigns map[string]*campaignActor
	// closing are the actors closeCampaign took out of campaigns and is
	// stopping: their records still write history (forgetHistory).
	closing map[*campaignActor]bool
	// tombs remembers campaigns closed with their queues deleted, so that
	// a straggling fetcher session cannot declare them again.
	tombs map[string]time.Time
	// ended holds the fetcher session keys ended by OpEnd and when, so
	// that a session reconnecting after its end is refused; kept for
	// endedFor.
	ended  map[string]time.Time
	ln     net.Listener
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// NewServer returns a scheduler over an open RabbitMQ connection, which it
// does not replace if RabbitMQ closes it (see NewServerDial).
func NewServer(cfg ServerConfig, conn *amqp.Connection, store seen.Store, log *slog.Logger) (*Server, error) {
	return newServer(cfg, &rabbit{conn: conn}, store, log)
}

// NewServerDial returns a scheduler that dials RabbitMQ with dial, and
// dials again whenever the connection is lost: a RabbitMQ restart pauses
// its campaigns (their held deliveries go back to their queues) and they
// go on once RabbitMQ is back, without a restart of the scheduler.
func NewServerDial(cfg ServerConfig, dial func() (*amqp.Connection, error), store seen.Store, log *slog.Logger) (*Server, error) {
	return newServer(cfg, &rabbit{dial: dial}, store, log)
}

func newServer(cfg ServerConfig, mq *rabbit, store seen.Store, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	log = log.With("scheduler", cfg.Name)
	mq.log = log
	pub, err := newPublisher(mq)
	if err != nil {
		return nil, err
	}
	if cfg.QueuedCacheBytes > 0 {
		store = seen.NewQueuedCache(store, cfg.QueuedCacheBytes)
	}
	client := session.Client{Token: cfg.Token, TLS: cfg.PeerTLS, InsecurePlaintext: cfg.PeerInsecurePlaintext}
	var peers *peerSet
	if cfg.Self != "" {
		peers = newPeerSet(cfg.Self, cfg.Peers, func(addr string) slotAsker { return newPeerLink(addr, client, log) })
	}
	return &Server{
		peers:     peers,
		cfg:       cfg,
		mq:        mq,
		pub:       pub,
		store:     store,
		log:       log,
		campaigns: map[string]*campaignActor{},
		closing:   map[*campaignActor]bool{},
		tombs:     map[string]time.Time{},
		ended:     map[string]time.Time{},
		conns:     map[net.Conn]struct{}{},
		clocks:    newHostClocks(),
		places:    newKeyPlaces(),
	}, nil
}

// Serve accepts sessions on ln until Close.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	s.ln = ln
	s.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return fmt.Errorf("accept: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(c)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Close stops accepting, ends every session and returns every held
// delivery to RabbitMQ.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.ln != nil {
		s.ln.Close()
	}
	for c := range s.conns {
		c.Close()
	}
	actors := make([]*campaignActor, 0, len(s.campaigns))
	for _, a := range s.campaigns {
		actors = append(actors, a)
	}
	s.campaigns = map[string]*campaignActor{}
	s.mu.Unlock()
	s.wg.Wait()
	for _, a := range actors {
		a.stop(10 * time.Second)
	}
	s.peers.close()
	err := s.pub.close()
	s.mq.close()
	return err
}

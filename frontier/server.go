package frontier

import (
	"cmp"
	"context"
	"crypto/subtle"
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

	"github.com/drover-crawl/drover/campaign"
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
}

// DefaultServerConfig returns the defaults.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		Name:         "scheduler",
		Token:        session.DevToken,
		Index:        0,
		Replicas:     1,
		Prefetch:     256,
		Batch:        DefaultBatch,
		LeaseTimeout: time.Minute,
		MaxLease:     5 * time.Minute,
		KeepAlive:    5 * time.Second,
		IdleRelease:  30 * time.Second,
		RobotsTTL:    24 * time.Hour,
		RevisitPoll:  time.Second,
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
	// peers: the other schedulers, owners of IP keys (peers.go); nil
	// when there are none.
	peers *peerSet
	// metrics: RegisterMetrics's hooks (metrics.go); nil without.
	metrics atomic.Pointer[schedMetrics]

	// createMu serializes creating actors (declares included); lock order:
	// createMu before mu.
	createMu  sync.Mutex
	mu        sync.Mutex
	campaigns map[string]*campaignActor
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
		store:     seen.NewQueuedCache(store),
		log:       log,
		campaigns: map[string]*campaignActor{},
		tombs:     map[string]time.Time{},
		ended:     map[string]time.Time{},
		conns:     map[net.Conn]struct{}{},
		clocks:    newHostClocks(),
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

// actor returns the campaign's actor, creating it (and declaring the
// campaign's queues) on first use. The declares (about 29 round trips to
// RabbitMQ) run under createMu, not mu, so that Stats and the other
// campaigns' sessions do not wait for them.
func (s *Server) actor(cfg campaign.Config) (*campaignActor, error) {
	a, err := s.actorOf(cfg)
	if a != nil && cfg.Live.Version > 0 {
		// A fetcher session carries the rules as they were when it
		// started: newer than these here when an Update could not
		// reach this scheduler.
		if _, err := s.takeRules(cfg.FrontierKey(), cfg.Live); err != nil {
			s.log.Error("live rules of a fetcher session not taken", "campaign", cfg.FrontierKey(), "version", cfg.Live.Version, "err", err)
		}
	}
	return a, err
}

// actorOf returns the campaign's actor, made if it has none yet.
func (s *Server) actorOf(cfg campaign.Config) (*campaignActor, error) {
	key := cfg.FrontierKey()
	if a, err := s.existingActor(key); a != nil || err != nil {
		return a, err
	}
	s.createMu.Lock()
	defer s.createMu.Unlock()
	if a, err := s.existingActor(key); a != nil || err != nil {
		return a, err
	}
	if err := s.retireEarlier(cfg); err != nil {
		return nil, err
	}
	// A campaign that has queues must have them all (vanished.go).
	vanished, err := s.vanishedOf(key)
	if err != nil {
		return nil, err
	}
	if err := s.declare(cfg); err != nil {
		return nil, err
	}
	// The live rules stored here may be newer than the config's (a fetcher
	// session started before an operator's last change).
	if cfg.Live, err = s.latestRules(key, cfg.Live); err != nil {
		return nil, err
	}
	a, err := newCampaignActor(s, cfg)
	if err != nil {
		return nil, err
	}
	if len(vanished) > 0 {
		a.shardsVanished(vanished)
	}
	s.mu.Lock()
	if _, err := s.existingActorLocked(key); err != nil || s.closed {
		// Closed (the campaign, or the server) while it was declared.
		s.mu.Unlock()
		a.stop(10 * time.Second)
		if err == nil {
			err = errors.New("scheduler closed")
		}
		return nil, err
	}
	s.campaigns[key] = a
	s.mu.Unlock()
	return a, nil
}

// existingActor returns the campaign's actor if it has one, or the error
// of a campaign closed for good.
func (s *Server) existingActor(id string) (*campaignActor, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.existingActorLocked(id)
}

func (s *Server) existingActorLocked(id string) (*campaignActor, error) {
	if a := s.campaigns[id]; a != nil {
		return a, nil
	}
	if at, ok := s.tombs[id]; ok {
		return nil, fmt.Errorf("campaign %s was closed at %s", id, at.Format(time.RFC3339))
	}
	return nil, nil
}

// declare declares the campaign's queues, of cfg's queue type or this
// scheduler's default, keeping the shards of a campaign started before
// with their arguments.
func (s *Server) declare(cfg campaign.Config) error {
	_, err := Topology{Campaign: cfg.FrontierKey()}.declareKeeping(s.mq.channel, cmp.Or(cfg.QueueType, s.cfg.QueueType))
	return err
}

func (s *Server) handle(c net.Conn) {
	defer c.Close()
	fr, fw := session.NewFrameReader(c), session.NewFrameWriter(c)
	refuse := func(reason string) {
		s.log.Warn("session refused", "remote", c.RemoteAddr().String(), "reason", reason)
		_ = fw.WriteFrame(session.FrameRefused, session.Refused{Reason: reason})
		_ = fw.Flush()
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	t, payload, err := fr.ReadFrame()
	if err != nil {
		refuse(fmt.Sprintf("reading hello: %v", err))
		return
	}
	var hello session.Hello
	if t != session.FrameHello {
		refuse(fmt.Sprintf("expected a hello frame, got %s", t))
		return
	}
	if err := session.Decode(t, payload, &hello); err != nil {
		refuse(err.Error())
		return
	}
	if hello.Version != session.ProtocolVersion {
		refuse(fmt.Sprintf("protocol version %d not supported (this scheduler speaks %d)", hello.Version, session.ProtocolVersion))
		return
	}
	if subtle.ConstantTimeCompare([]byte(hello.Token), []byte(s.cfg.Token)) != 1 {
		refuse("wrong or missing token (set DROVER_TOKEN to the scheduler's token)")
		return
	}
	welcome := session.Welcome{Version: session.ProtocolVersion, Scheduler: s.cfg.Name, KeepAlive: s.cfg.KeepAlive, LeaseTimeout: s.cfg.LeaseTimeout}
	switch hello.Role {
	case session.RoleFetcher:
		if hello.Campaign == nil {
			refuse("a fetcher session needs its campaign")
			return
		}
		if s.isEnded(hello.Key) {
			s.log.Info("fetcher session refused: ended by its campaign", "client", hello.Client)
			_ = fw.WriteFrame(session.FrameRefused, session.Refused{Reason: errSessionEnded.Error(), Ended: true})
			_ = fw.Flush()
			return
		}
		cfg := hello.Campaign.WithDefaults()
		if err := cfg.Validate(); err != nil {
			refuse(fmt.Sprintf("campaign config: %v", err))
			return
		}
		a, err := s.actor(cfg)
		if err != nil {
			refuse(fmt.Sprintf("opening campaign %s: %v", cfg.ID, err))
			return
		}
		welcome.Recorded, welcome.Incarnation = hello.Recorded, a.incarnation
		if err := fw.WriteFrame(session.FrameWelcome, welcome); err != nil {
			return
		}
		if err := fw.Flush(); err != nil {
			return
		}
		s.serveFetcher(c, fr, fw, a, hello)
	case session.RoleControl:
		if err := fw.WriteFrame(session.FrameWelcome, welcome); err != nil {
			return
		}
		if err := fw.Flush(); err != nil {
			return
		}
		s.serveControl(c, fr, fw)
	default:
		refuse(fmt.Sprintf("unknown role %q", hello.Role))
	}
}

// fetcherSession is a fetcher session as its campaign actor sees it.
// credit and leases belong to the actor's goroutine.
type fetcherSession struct {
	client string
	// key is the Hello's (OpEnd names it); ending: FrameEnd was sent, so
	// the session gets no more leases and its credit is ignored.
	key    string
	ending bool
	// recorded: the fetcher asked for FrameRecorded (Hello.Recorded);
	// resolves: it takes resolve leases (Hello.Resolve).
	recorded bool
	resolves bool
	credit   int
	leases   map[uint64]struct{}
	out      chan outFrame
	quit     chan struct{}
	once     sync.Once
}

type outFrame struct {
	t session.FrameType
	v any
}

// send queues a frame for the session's writer; it never blocks the actor:
// a session whose writer is that far behind is closed.
func (s *fetcherSession) send(t session.FrameType, v any) {
	select {
	case s.out <- outFrame{t, v}:
	case <-s.quit:
	default:
		s.close()
	}
}

// trySend queues a frame the fetcher can do without (FrameRecorded): when
// the writer is behind (its queue half full), it is dropped, and never
// fills the queue that send closes the session on.
func (s *fetcherSession) trySend(t session.FrameType, v any) {
	if len(s.out) >= cap(s.out)/2 {
		return
	}
	select {
	case s.out <- outFrame{t, v}:
	default:
	}
}

func (s *fetcherSession) close() { s.once.Do(func() { close(s.quit) }) }

// serveFetcher runs a fetcher session on c, whose hello was welcomed, for
// campaign a: joined to a's actor, its frames written by one goroutine
// and read, and dispatched to the actor, by this one, until either ends.
func (s *Server) serveFetcher(c net.Conn, fr *session.FrameReader, fw *session.FrameWriter, a *campaignActor, hello session.Hello) {
	client := hello.Client
	sess, ok := s.joinFetcher(c, fw, a, hello)
	if !ok {
		return
	}
	defer func() {
		sess.close()
		a.post(func() { a.removeSession(sess) })
		s.log.Info("fetcher session closed", "campaign", a.cfg.ID, "client", client)
	}()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		sess.writeFrames(c, fw)
	}()
	// refuse tells the fetcher why its session ends and waits (briefly) for
	// the writer to send it; its leases go back to the pool.
	refuse := func(reason string) {
		s.log.Warn("closing fetcher session", "client", client, "reason", reason)
		sess.send(session.FrameRefused, session.Refused{Reason: reason})
		select {
		case <-writerDone:
		case <-time.After(2 * time.Second):
		}
	}
	s.readFetcher(c, fr, a, sess, refuse)
}

// joinFetcher adds a new session of client to the campaign's actor. When
// the actor refuses it (the campaign is closing here), the fetcher is told
// why, and ok is false.
func (s *Server) joinFetcher(c net.Conn, fw *session.FrameWriter, a *campaignActor, hello session.Hello) (sess *fetcherSession, ok bool) {
	client := hello.Client
	sess = &fetcherSession{client: client, key: hello.Key, recorded: hello.Recorded, resolves: hello.Resolve, leases: map[uint64]struct{}{}, out: make(chan outFrame, 1024), quit: make(chan struct{})}
	var err error
	if !a.call(func() { err = a.addSession(sess) }) {
		err = fmt.Errorf("campaign %s is closing on this scheduler", a.cfg.ID)
	}
	if err != nil {
		_ = fw.WriteFrame(session.FrameRefused, session.Refused{Reason: err.Error(), Ended: errors.Is(err, errSessionEnded)})
		_ = fw.Flush()
		return nil, false
	}
	s.log.Info("fetcher session opened", "campaign", a.cfg.ID, "client", client, "remote", c.RemoteAddr().String())
	return sess, true
}

// writeFrames is the session's writer: it sends the frames queued by send,
// flushing when the queue is empty, until the session closes. A Refused
// frame is the last: it is flushed, then the connection closes.
func (sess *fetcherSession) writeFrames(c net.Conn, fw *session.FrameWriter) {
	defer c.Close()
	for {
		select {
		case f := <-sess.out:
			if err := fw.WriteFrame(f.t, f.v); err != nil {
				sess.close()
				return
			}
			if f.t == session.FrameRefused || len(sess.out) == 0 {
				if err := fw.Flush(); err != nil || f.t == session.FrameRefused {
					sess.close()
					return
				}
			}
		case <-sess.quit:
			return
		}
	}
}

// readFetcher is the session's reader: it reads the fetcher's frames and
// dispatches each, until the connection ends or a frame is refused (a
// malformed or oversized one too).
func (s *Server) readFetcher(c net.Conn, fr *session.FrameReader, a *campaignActor, sess *fetcherSession, refuse func(reason string)) {
	for {
		_ = c.SetReadDeadline(time.Now().Add(3 * s.cfg.KeepAlive))
		t, payload, err := fr.ReadFrame()
		if err != nil {
			select {
			case <-sess.quit:
				return
			default:
			}
			if errors.Is(err, session.ErrBadFrame) || errors.Is(err, session.ErrFrameTooLarge) {
				refuse(err.Error())
			} else if !errors.Is(err, net.ErrClosed) {
				s.log.Info("fetcher session ended", "client", sess.client, "reason", err)
			}
			return
		}
		if reason := dispatchFetcher(a, sess, t, payload); reason != "" {
			refuse(reason)
			return
		}
	}
}

// dispatchFetcher hands one frame of a fetcher session to the campaign's
// actor, or answers it; it returns why the session must end, or "".
func dispatchFetcher(a *campaignActor, sess *fetcherSession, t session.FrameType, payload []byte) (refusal string) {
	switch t {
	case session.FrameCredit:
		var cr session.Credit
		if err := session.Decode(t, payload, &cr); err != nil {
			return err.Error()
		}
		if cr.N < 0 || cr.N > 1<<16 {
			return fmt.Sprintf("credit %d out of range 0..65536", cr.N)
		}
		a.post(func() {
			if !sess.ending {
				sess.credit += cr.N
			}
		})
	case session.FrameOutcomes:
		var os session.Outcomes
		if err := session.Decode(t, payload, &os); err != nil {
			return err.Error()
		}
		a.post(func() { a.onOutcomes(sess, os.Items) })
	case session.FramePing:
		a.post(func() { a.renew(sess) })
		sess.send(session.FramePong, nil)
	default:
		return fmt.Sprintf("unexpected %s frame on a fetcher session", t)
	}
	return ""
}

func (s *Server) serveControl(c net.Conn, fr *session.FrameReader, fw *session.FrameWriter) {
	for {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Minute))
		t, payload, err := fr.ReadFrame()
		if err != nil {
			return
		}
		var req session.Request
		var rep session.Reply
		if t == session.FramePing {
			_ = fw.WriteFrame(session.FramePong, nil)
			if fw.Flush() != nil {
				return
			}
			continue
		}
		if t != session.FrameRequest {
			rep.Error = fmt.Sprintf("unexpected %s frame on a control session", t)
		} else if err := session.Decode(t, payload, &req); err != nil {
			rep.Error = err.Error()
		} else if req.Op == session.OpSlots {
			rep.Waits = s.clocks.answer(req.Slots, req.Started, time.Now())
		} else if req.Campaign == nil || req.Campaign.ID == "" {
			rep.Error = "request without a campaign"
		} else {
			rep = s.control(req)
		}
		if err := fw.WriteFrame(session.FrameReply, rep); err != nil {
			return
		}
		if err := fw.Flush(); err != nil {
			return
		}
	}
}

func (s *Server) control(req session.Request) session.Reply {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch req.Op {
	case session.OpSeed:
		n, err := s.seed(ctx, req.Campaign.WithDefaults(), req.URLs, req.Live)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Seeded: n}
	case session.OpCheck:
		if _, err := s.check(req.Campaign.WithDefaults()); err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{}
	case session.OpStats:
		st, err := s.Stats(req.Campaign.ID)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Stats: &st}
	case session.OpFailures, session.OpForget:
		if req.Op == session.OpForget {
			if err := s.store.DropFailures(req.Campaign.ID); err != nil {
				return session.Reply{Error: err.Error()}
			}
			return session.Reply{}
		}
		fs, err := s.store.Failures(req.Campaign.ID, req.Reason)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		rep := session.Reply{FailuresTotal: len(fs)}
		rep.Failures = fs[:min(len(fs), session.MaxFailuresReply)]
		return rep
	case session.OpForgetHistory:
		if err := s.forgetHistory(req.Campaign.ID); err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{}
	case session.OpEnd:
		return session.Reply{Ended: s.endSessions(req.Campaign.ID, req.Keys)}
	case session.OpURL:
		if len(req.URLs) != 1 {
			return session.Reply{Error: "url: give one URL"}
		}
		st, err := s.urlState(req.Campaign.ID, req.URLs[0])
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{URL: &st}
	case session.OpURLs:
		if req.List == nil {
			return session.Reply{Error: "urls: give a host and a state"}
		}
		page, err := s.urlList(req.Campaign.ID, *req.List)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Page: &page}
	case session.OpRules:
		if err := s.setRules(ctx, req.Campaign.ID, req.Campaign.Live); err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{}
	case session.OpClose:
		st, err := s.closeCampaign(req.Campaign.ID, req.Final || req.Delete, req.Delete)
		if err != nil {
			return session.Reply{Error: err.Error()}
		}
		return session.Reply{Stats: &st}
	}
	return session.Reply{Error: fmt.Sprintf("unknown op %q", req.Op)}
}

// seedBurst is how many seeds of one host keep their priority.
const seedBurst = 64

// check says whether this scheduler can run the campaign (its config is
// valid and names a policy the scheduler has), and returns its policy. It
// creates nothing.
func (s *Server) check(cfg campaign.Config) (Policy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return s.cfg.policy(cfg.Priority)
}

// seed declares the campaign's queues and publishes its seeds (those not
// already queued), confirmed, at depth 0. live: the seeds add to a
// running campaign, refused once it closed here (its queues are gone and
// must not come back).
func (s *Server) seed(ctx context.Context, cfg campaign.Config, urls []string, live bool) (int, error) {
	p, err := s.check(cfg)
	if err != nil {
		return 0, err
	}
	key := cfg.FrontierKey()
	// Seeding starts a run of the campaign, which no other run of its ID
	// may see (retireEarlier).
	s.createMu.Lock()
	err = s.retireEarlier(cfg)
	s.createMu.Unlock()
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	_, closed := s.tombs[key]
	if !live {
		delete(s.tombs, key)
	}
	s.mu.Unlock()
	if closed && live {
		return 0, fmt.Errorf("campaign %s has closed on scheduler %s: it takes no more seeds", key, s.cfg.Name)
	}
	if err := s.declare(cfg); err != nil {
		return 0, err
	}
	var keys []seen.Key
	var us []shardURL
	topo := Topology{Campaign: key}
	perHost := map[string]int{}
	for _, raw := range urls {
		u, err := urlrule.Normalize(raw, nil, cfg.DropParams)
		if err != nil {
			return 0, fmt.Errorf("seed %q: %w", raw, err)
		}
		h, err := urlrule.HostKey(u)
		if err != nil {
			return 0, fmt.Errorf("seed %q: %w", raw, err)
		}
		keys = append(keys, seen.KeyOf(u))
		score := cfg.SeedScores[raw]
		level := priorityLevel(p.Priority(Item{URL: u, Host: h, Score: score}))
		// A host seeded with more URLs than it can be fetched soon gets
		// the rest at the lowest priority, so that its backlog does not sit
		// ahead of the other hosts of its shard.
		if perHost[h]++; perHost[h] > seedBurst {
			level = 0
		}
		us = append(us, shardURL{queue: topo.Shard(ShardOf(cfg.ClockKey(h))), host: h, m: urlMsg{URL: u, Score: score}, level: level})
	}
	queued, err := s.store.Queued(key, keys)
	if err != nil {
		return 0, err
	}
	var newKeys []seen.Key
	var newUs []shardURL
	for i := range us {
		if !queued[i] {
			newKeys = append(newKeys, keys[i])
			newUs = append(newUs, us[i])
		}
	}
	// Batched as links are, each level apart: a host seeded with
	// thousands of URLs ahead of another in its shard is taken a batch a
	// message, not one URL per prefetch slot (the other host waited for
	// thousands of park confirms one prefetch window at a time).
	if err := s.pub.publish(ctx, batchMessages(newUs, s.cfg.Batch)); err != nil {
		return 0, err
	}
	return len(newUs), s.store.MarkQueued(key, newKeys)
}

// Stats returns what this scheduler knows of a campaign, with RabbitMQ's
// count of its queued messages.
func (s *Server) Stats(id string) (session.Stats, error) {
	s.mu.Lock()
	a := s.campaigns[id]
	s.mu.Unlock()
	st := session.Stats{Campaign: id}
	if a != nil {
		st = a.stats()
	}
	st.Schedulers = []string{s.cfg.Name}
	if st.ConsumeError != "" {
		st.ConsumeError = s.cfg.Name + ": " + st.ConsumeError
	}
	conn, err := s.mq.get()
	if err != nil {
		return st, err
	}
	c, err := Topology{Campaign: id}.counts(conn)
	if err != nil {
		return st, err
	}
	st.Queued, st.DeadQueued, st.Consumers, st.Uncounted = c.queued, c.dead, c.consumers, c.uncounted
	return st, nil
}

// closeCampaign ends the campaign here: its sessions close, the outcomes
// being recorded finish, and its held deliveries go back to their queues.
// final: the campaign is over, and fetcher sessions for it are refused
// from now on (until it is seeded again). del: its queues and this
// scheduler's seen marks are removed too; callers delete only once every
// scheduler has closed the campaign (CloseEverywhere), so that none is
// still parking or publishing into queues that vanish under it.
func (s *Server) closeCampaign(id string, final, del bool) (session.Stats, error) {
	s.mu.Lock()
	a := s.campaigns[id]
	delete(s.campaigns, id)
	if final {
		s.m().forget(campaign.KeyID(id))
		// At once, under the lock that creates actors: a fetcher session
		// reconnecting while the campaign closes must not open it again.
		s.tombs[id] = time.Now()
	}
	s.mu.Unlock()
	var st session.Stats
	if a != nil {
		a.stop(30 * time.Second)
		st = a.stats()
	}
	st.Campaign = id
	st.Schedulers = []string{s.cfg.Name}
	if del {
		// Idempotent: the first scheduler to get here deletes the queues.
		conn, err := s.mq.get()
		if err != nil {
			return st, err
		}
		if err := (Topology{Campaign: id}).Delete(conn); err != nil {
			return st, err
		}
		if err := s.store.Drop(id); err != nil {
			return st, err
		}
		s.log.Info("campaign closed and its queues deleted", "campaign", id)
	}
	return st, nil
}

package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/tlsconf"
)

// replyError is an error a scheduler answered with (it is up).
type replyError struct{ msg string }

func (e *replyError) Error() string { return e.msg }

// Errors of the client side.
var (
	// ErrSessionClosed: the session ended (see Session.Err for why).
	ErrSessionClosed = errors.New("session closed")
	// ErrTLS: the TLS handshake with the scheduler failed.
	ErrTLS = errors.New("TLS handshake failed")
)

// Client holds what a session needs besides the scheduler's address: the
// shared token and how to protect it on the wire. The zero TLS is
// plaintext, which is refused to a non-loopback address unless
// InsecurePlaintext allows it: the token would travel in the clear.
type Client struct {
	Token string
	// TLS, when set, wraps every session in TLS (see package tlsconf).
	TLS *tls.Config
	// InsecurePlaintext allows a plaintext session beyond loopback.
	InsecurePlaintext bool
	// Known, when set, is the campaign's KnownLinks for the fetcher
	// sessions dialled: they ask for FrameRecorded, leave the links it
	// knows out of their outcomes, and teach it those recorded.
	Known *KnownLinks
	// Resolves: the fetcher sessions dialled take KindResolve leases
	// (Hello.Resolve).
	Resolves bool
}

// handshake opens a connection and exchanges Hello / Welcome.
func (cl Client) handshake(ctx context.Context, addr string, hello Hello) (net.Conn, *FrameReader, *FrameWriter, Welcome, error) {
	hello.Token = cl.Token
	d := &net.Dialer{}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var c net.Conn
	var err error
	if cl.TLS != nil {
		c, err = (&tls.Dialer{NetDialer: d, Config: cl.TLS}).DialContext(dctx, "tcp", addr)
		var opErr *net.OpError
		if err != nil && !(errors.As(err, &opErr) && opErr.Op == "dial") {
			return nil, nil, nil, Welcome{}, fmt.Errorf("scheduler %s: %w: %v (does it serve TLS, and does --tls-ca / DROVER_TLS_CA hold its CA?)", addr, ErrTLS, err)
		}
	} else {
		c, err = d.DialContext(dctx, "tcp", addr)
	}
	if err != nil {
		return nil, nil, nil, Welcome{}, fmt.Errorf("scheduler %s unreachable: %w (start one with `go run ./scheduler` or `make dev`, or set DROVER_SCHEDULER)", addr, err)
	}
	if cl.TLS == nil && !cl.InsecurePlaintext && !tlsconf.IsLoopbackNetAddr(c.RemoteAddr()) {
		c.Close()
		return nil, nil, nil, Welcome{}, fmt.Errorf("scheduler %s: %w: refusing to send the session token in plaintext to %s; set DROVER_TLS_CA (--tls-ca) to use TLS, or DROVER_INSECURE_PLAINTEXT=1 to allow it",
			addr, tlsconf.ErrPlaintext, c.RemoteAddr())
	}
	fr, fw := NewFrameReader(c), NewFrameWriter(c)
	hello.Version = ProtocolVersion
	fail := func(err error) (net.Conn, *FrameReader, *FrameWriter, Welcome, error) {
		c.Close()
		return nil, nil, nil, Welcome{}, err
	}
	if err := fw.WriteFrame(FrameHello, hello); err != nil {
		return fail(err)
	}
	if err := fw.Flush(); err != nil {
		return fail(fmt.Errorf("scheduler %s: %w", addr, err))
	}
	welcomeBy := time.Now().Add(30 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(welcomeBy) {
		welcomeBy = d
	}
	_ = c.SetReadDeadline(welcomeBy)
	t, payload, err := fr.ReadFrame()
	if err != nil {
		if cl.TLS != nil {
			// A scheduler that requires a client certificate says so in an
			// alert that shows here, after the handshake.
			return fail(fmt.Errorf("scheduler %s: reading welcome: %w (a scheduler with --tls-client-ca needs --tls-cert and --tls-key)", addr, err))
		}
		return fail(fmt.Errorf("scheduler %s: reading welcome: %w (a TLS scheduler needs --tls-ca / DROVER_TLS_CA here)", addr, err))
	}
	_ = c.SetReadDeadline(time.Time{})
	switch t {
	case FrameWelcome:
		var w Welcome
		if err := Decode(t, payload, &w); err != nil {
			return fail(err)
		}
		return c, fr, fw, w, nil
	case FrameRefused:
		return fail(fmt.Errorf("scheduler %s: %w", addr, refusal(payload)))
	}
	return fail(fmt.Errorf("scheduler %s: unexpected %s frame: %w", addr, t, ErrBadFrame))
}

// refusal is the error a Refused frame's payload says: ErrEnded for a
// session its campaign ended, ErrRefused otherwise, with the reason.
func refusal(payload []byte) error {
	var r Refused
	_ = Decode(FrameRefused, payload, &r)
	if r.Ended {
		return fmt.Errorf("%w: %s", ErrEnded, r.Reason)
	}
	return fmt.Errorf("%w: %s", ErrRefused, r.Reason)
}

// Session is a fetcher's session with a scheduler: leases come in on
// Leases, outcomes and credit go out batched.
type Session struct {
	conn    net.Conn
	welcome Welcome
	leases  chan Lease

	mu       sync.Mutex
	outcomes []Outcome
	credit   int
	wake     chan struct{}
	err      error
	// known filters the links reported (nil: none), as known to scope;
	// pending holds, by lease, the keys of the links reported and not yet
	// recorded, pendingKeys how many keys that is.
	known       *KnownLinks
	scope       knownScope
	pending     map[uint64][]linkKey
	pendingKeys int

	done    chan struct{}
	closing chan struct{}
	// ended is closed when the scheduler sent FrameEnd.
	ended chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	closeOnce sync.Once // closes closing
}

// DialSession opens a plaintext fetcher session for a campaign (see
// Client.DialSession).
func DialSession(ctx context.Context, addr, token, client string, cfg campaign.Config, buffer int) (*Session, error) {
	return Client{Token: token}.DialSession(ctx, addr, client, cfg, buffer)
}

// DialSession opens a fetcher session for a campaign, without a key (see
// DialSessionKey).
func (cl Client) DialSession(ctx context.Context, addr, client string, cfg campaign.Config, buffer int) (*Session, error) {
	return cl.DialSessionKey(ctx, addr, client, "", cfg, buffer)
}

// DialSessionKey opens a fetcher session for a campaign under key
// (Hello.Key: OpEnd can end it; "" for none). buffer sizes the lease
// channel (the fetcher's concurrency). A key the campaign already ended
// is refused with ErrEnded.
func (cl Client) DialSessionKey(ctx context.Context, addr, client, key string, cfg campaign.Config, buffer int) (*Session, error) {
	c, fr, fw, w, err := cl.handshake(ctx, addr, Hello{Role: RoleFetcher, Client: client, Campaign: &cfg, Key: key, Recorded: cl.Known != nil, Resolve: cl.Resolves})
	if err != nil {
		return nil, err
	}
	s := &Session{
		conn:    c,
		welcome: w,
		leases:  make(chan Lease, max(buffer, 1)*2),
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		closing: make(chan struct{}),
		ended:   make(chan struct{}),
	}
	if w.Recorded && w.Incarnation != 0 && cl.Known != nil {
		s.known, s.pending = cl.Known, map[uint64][]linkKey{}
		s.scope = knownScope{scheduler: w.Scheduler, incarnation: w.Incarnation}
	}
	s.wg.Add(2)
	go s.readLoop(fr)
	go s.writeLoop(fw)
	return s, nil
}

// Scheduler names the scheduler at the other end.
func (s *Session) Scheduler() string { return s.welcome.Scheduler }

// Leases delivers leased URLs; it is closed when the session ends.
func (s *Session) Leases() <-chan Lease { return s.leases }

// Done is closed when the session has ended.
func (s *Session) Done() <-chan struct{} { return s.done }

// Ended is closed when the campaign ended the session through the
// scheduler (FrameEnd): take no more leases, report the ones in flight,
// release the rest and Close. Leases is closed after the last lease the
// scheduler sent before it.
func (s *Session) Ended() <-chan struct{} { return s.ended }

// Err says why the session ended.
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Credit offers the scheduler n more URLs.
func (s *Session) Credit(n int) {
	s.mu.Lock()
	s.credit += n
	s.mu.Unlock()
	s.poke()
}

// Report queues an outcome; it goes out with the next batch, without the
// links the session's KnownLinks knows (counted in Known). A page with a
// validator keeps them all: the scheduler keeps its links in its fetch
// history, for a later run to follow when the server answers 304.
func (s *Session) Report(o Outcome) {
	var keys []linkKey
	if s.known != nil && len(o.Links) > 0 && !o.Capture.Conditional() {
		var dropped int
		o.Links, keys, dropped = s.known.filter(s.scope, o.Links)
		o.Known += dropped
		if o.SinkFailed && !o.SinkRefused {
			keys = nil // parked, not recorded: nothing will confirm them
		}
	}
	s.mu.Lock()
	if len(keys) > 0 {
		if s.pendingKeys+len(keys) > maxPendingKeys {
			// Outcomes whose record failed are never confirmed: forget
			// them all rather than grow (their links are only sent again).
			clear(s.pending)
			s.pendingKeys = 0
		}
		s.pending[o.LeaseID] = keys
		s.pendingKeys += len(keys)
	}
	s.outcomes = append(s.outcomes, o)
	s.mu.Unlock()
	s.poke()
}

// maxPendingKeys bounds the links (16 bytes each) a session remembers
// until the record of their outcome is confirmed: 1 MiB.
const maxPendingKeys = 1 << 16

// recorded teaches the session's KnownLinks the links of the outcomes a
// scheduler recorded.
func (s *Session) recorded(leases []uint64) {
	var keys []linkKey
	s.mu.Lock()
	for _, id := range leases {
		keys = append(keys, s.pending[id]...)
		s.pendingKeys -= len(s.pending[id])
		delete(s.pending, id)
	}
	s.mu.Unlock()
	if len(keys) > 0 {
		s.known.add(s.scope, keys)
	}
}

func (s *Session) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Session) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.once.Do(func() {
		close(s.done)
		s.conn.Close()
	})
}

// Close sends what is queued, then ends the session; the scheduler returns
// the leases not reported to the pool.
func (s *Session) Close() error {
	// Once: two Closes at the same time would both see closing open.
	s.closeOnce.Do(func() { close(s.closing) })
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
	}
	s.fail(ErrSessionClosed)
	s.wg.Wait()
	return nil
}

func (s *Session) readLoop(fr *FrameReader) {
	defer s.wg.Done()
	defer close(s.leases)
	for {
		_ = s.conn.SetReadDeadline(time.Now().Add(3 * s.welcome.KeepAlive))
		t, payload, err := fr.ReadFrame()
		if err != nil {
			s.fail(fmt.Errorf("session with %s: %w", s.welcome.Scheduler, err))
			return
		}
		switch t {
		case FrameLeases:
			var ls Leases
			if err := Decode(t, payload, &ls); err != nil {
				s.fail(err)
				return
			}
			for _, l := range ls.Items {
				select {
				case s.leases <- l:
				case <-s.done:
					return
				}
			}
		case FramePong:
		case FrameRecorded:
			if s.known == nil {
				s.fail(fmt.Errorf("recorded frame not asked for: %w", ErrBadFrame))
				return
			}
			var r Recorded
			if err := Decode(t, payload, &r); err != nil {
				s.fail(err)
				return
			}
			s.recorded(r.Leases)
		case FrameEnd:
			// Nothing follows but pongs: the reader's work is done, and
			// the writer goes on until Close sends the last outcomes.
			close(s.ended)
			return
		case FrameRefused:
			// ErrEnded when it was ended while its hello was on the way
			// (OpEnd raced it).
			s.fail(refusal(payload))
			return
		default:
			s.fail(fmt.Errorf("unexpected %s frame: %w", t, ErrBadFrame))
			return
		}
	}
}

// outcomesFrameBytes bounds the estimated size of one outcomes frame, well
// under MaxFrame: the outcomes queued while the writer was busy can carry
// far more links than one frame may.
const outcomesFrameBytes = 4 << 20

// splitOutcomes cuts outs into batches of at most limit estimated bytes
// (one outcome alone may be larger; the fetcher's caps bound it far below
// MaxFrame).
func splitOutcomes(outs []Outcome, limit int) [][]Outcome {
	var parts [][]Outcome
	start, size := 0, 0
	for i, o := range outs {
		n := outcomeSize(o)
		if i > start && size+n > limit {
			parts = append(parts, outs[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(outs) {
		parts = append(parts, outs[start:])
	}
	return parts
}

// outcomeSize estimates an outcome's JSON size from above.
func outcomeSize(o Outcome) int {
	n := 256 + 2*len(o.Error)
	for _, l := range o.Links {
		n += 64 + 2*len(l.URL)
	}
	if o.Robots != nil {
		n += 64 + 2*len(o.Robots.Body) + 2*len(o.Robots.Error)
	}
	return n
}

// writeLoop sends outcomes and credit in batches, and a ping every
// keepalive (which also renews the session's leases).
func (s *Session) writeLoop(fw *FrameWriter) {
	defer s.wg.Done()
	ping := time.NewTicker(s.welcome.KeepAlive)
	defer ping.Stop()
	closing := s.closing
	for {
		select {
		case <-s.wake:
			// Let a few more outcomes join the batch.
			time.Sleep(time.Millisecond)
		case <-ping.C:
			if err := fw.WriteFrame(FramePing, nil); err != nil {
				s.fail(err)
				return
			}
		case <-closing:
			closing = nil
		case <-s.done:
			return
		}
		s.mu.Lock()
		outs, credit := s.outcomes, s.credit
		s.outcomes, s.credit = nil, 0
		s.mu.Unlock()
		for _, part := range splitOutcomes(outs, outcomesFrameBytes) {
			if err := fw.WriteFrame(FrameOutcomes, Outcomes{Items: part}); err != nil {
				s.fail(err)
				return
			}
		}
		if credit > 0 && closing != nil {
			if err := fw.WriteFrame(FrameCredit, Credit{N: credit}); err != nil {
				s.fail(err)
				return
			}
		}
		if err := fw.Flush(); err != nil {
			s.fail(err)
			return
		}
		if closing == nil {
			s.mu.Lock()
			empty := len(s.outcomes) == 0
			s.mu.Unlock()
			if empty {
				s.fail(ErrSessionClosed)
				return
			}
		}
	}
}

// Control is a control session: seeding, stats and closing campaigns.
// Safe for concurrent use (requests are serialized).
type Control struct {
	mu   sync.Mutex
	conn net.Conn
	fr   *FrameReader
	fw   *FrameWriter
	addr string
}

// DialControl opens a plaintext control session (see Client.DialControl).
func DialControl(ctx context.Context, addr, token string) (*Control, error) {
	return Client{Token: token}.DialControl(ctx, addr)
}

// DialControl opens a control session.
func (cl Client) DialControl(ctx context.Context, addr string) (*Control, error) {
	c, fr, fw, _, err := cl.handshake(ctx, addr, Hello{Role: RoleControl, Client: "control"})
	if err != nil {
		return nil, err
	}
	return &Control{conn: c, fr: fr, fw: fw, addr: addr}, nil
}

func (c *Control) do(ctx context.Context, req Request) (Reply, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(3 * time.Minute)
	}
	_ = c.conn.SetDeadline(deadline)
	if err := c.fw.WriteFrame(FrameRequest, req); err != nil {
		return Reply{}, err
	}
	if err := c.fw.Flush(); err != nil {
		return Reply{}, fmt.Errorf("scheduler %s: %w", c.addr, err)
	}
	t, payload, err := c.fr.ReadFrame()
	if err != nil {
		return Reply{}, fmt.Errorf("scheduler %s: %w", c.addr, err)
	}
	var rep Reply
	if t != FrameReply {
		return Reply{}, fmt.Errorf("scheduler %s: unexpected %s frame: %w", c.addr, t, ErrBadFrame)
	}
	if err := Decode(t, payload, &rep); err != nil {
		return Reply{}, err
	}
	if rep.Error != "" {
		return rep, &replyError{fmt.Sprintf("scheduler %s: %s", c.addr, rep.Error)}
	}
	return rep, nil
}

// Slots asks the scheduler for starts on the clocks it owns, and reports
// starts under them (OpSlots): one wait per ask, in order.
func (c *Control) Slots(ctx context.Context, asks []SlotAsk, started []SlotStart) ([]time.Duration, error) {
	rep, err := c.do(ctx, Request{Op: OpSlots, Slots: asks, Started: started})
	if err == nil && len(rep.Waits) != len(asks) {
		err = fmt.Errorf("scheduler %s: %d waits for %d slots asked: %w", c.addr, len(rep.Waits), len(asks), ErrBadFrame)
	}
	return rep.Waits, err
}

// Seed publishes seed URLs (normalized, confirmed) for the campaign.
func (c *Control) Seed(ctx context.Context, cfg campaign.Config, urls []string) (int, error) {
	rep, err := c.do(ctx, Request{Op: OpSeed, Campaign: &cfg, URLs: urls})
	return rep.Seeded, err
}

// AddSeeds is Seed for a campaign that runs (a seed list): refused by a
// scheduler that closed it.
func (c *Control) AddSeeds(ctx context.Context, cfg campaign.Config, urls []string) (int, error) {
	rep, err := c.do(ctx, Request{Op: OpSeed, Campaign: &cfg, URLs: urls, Live: true})
	return rep.Seeded, err
}

// Check asks the scheduler whether it can run the campaign: its config is
// valid and names a priority policy the scheduler has. It creates nothing.
// A scheduler older than the check answers `unknown op "check"`.
func (c *Control) Check(ctx context.Context, cfg campaign.Config) error {
	_, err := c.do(ctx, Request{Op: OpCheck, Campaign: &cfg})
	return err
}

// Stats returns the scheduler's stats of a campaign.
func (c *Control) Stats(ctx context.Context, id string) (Stats, error) {
	rep, err := c.do(ctx, Request{Op: OpStats, Campaign: &campaign.Config{ID: id}})
	if err != nil || rep.Stats == nil {
		return Stats{Campaign: id}, err
	}
	return *rep.Stats, nil
}

// CloseCampaign ends a campaign on the scheduler for good; with del, its
// queues and this scheduler's seen marks go too. With several schedulers,
// use CloseEverywhere, which deletes only after every one let go.
func (c *Control) CloseCampaign(ctx context.Context, id string, del bool) (Stats, error) {
	return c.closeCampaign(ctx, id, true, del)
}

func (c *Control) closeCampaign(ctx context.Context, id string, final, del bool) (Stats, error) {
	rep, err := c.do(ctx, Request{Op: OpClose, Campaign: &campaign.Config{ID: id}, Final: final, Delete: del})
	if err != nil {
		return Stats{Campaign: id}, err
	}
	if rep.Stats == nil {
		return Stats{Campaign: id}, nil
	}
	return *rep.Stats, nil
}

// EndSessions ends the campaign's fetcher sessions named by keys on this
// scheduler (FrameEnd) and refuses those keys from now on; it returns how
// many of them had a session open here.
func (c *Control) EndSessions(ctx context.Context, id string, keys []string) (int, error) {
	rep, err := c.do(ctx, Request{Op: OpEnd, Campaign: &campaign.Config{ID: id}, Keys: keys})
	return rep.Ended, err
}

// Failures lists the campaign's failure records on this scheduler (reason
// "" for all) and how many there are.
func (c *Control) Failures(ctx context.Context, id, reason string) ([]FailureRecord, int, error) {
	rep, err := c.do(ctx, Request{Op: OpFailures, Campaign: &campaign.Config{ID: id}, Reason: reason})
	return rep.Failures, rep.FailuresTotal, err
}

// Close ends the control session.
func (c *Control) Close() error { return c.conn.Close() }

// ParseAddrs splits a DROVER_SCHEDULER value ("host:port,host:port").
func ParseAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// CampaignStats asks every scheduler for its stats of a campaign and adds
// them up. A scheduler that cannot be reached is named in Missing, and the
// sum still counts as idle only when RabbitMQ shows no consumer of the
// campaign beyond the schedulers that answered (Stats.Idle): a scheduler
// gone for good does not hold a campaign open, and one cut off but alive
// does not let it end early. It fails when no scheduler answers, or when
// one answers with an error.
func CampaignStats(ctx context.Context, addrs []string, token, id string) (Stats, error) {
	return Client{Token: token}.CampaignStats(ctx, addrs, id)
}

// CampaignStats is the package function CampaignStats over cl.
func (cl Client) CampaignStats(ctx context.Context, addrs []string, id string) (Stats, error) {
	total := Stats{Campaign: id}
	var unreachable []error
	for _, addr := range addrs {
		c, err := cl.DialControl(ctx, addr)
		if err != nil {
			if errors.Is(err, ErrRefused) || errors.Is(err, ErrTLS) || errors.Is(err, tlsconf.ErrPlaintext) || ctx.Err() != nil {
				return total, err
			}
			total.Missing = append(total.Missing, addr)
			unreachable = append(unreachable, err)
			continue
		}
		st, err := c.Stats(ctx, id)
		c.Close()
		var rerr *replyError
		switch {
		case errors.As(err, &rerr), err != nil && ctx.Err() != nil:
			return total, err
		case err != nil:
			total.Missing = append(total.Missing, addr)
			unreachable = append(unreachable, err)
			continue
		}
		total.Add(st)
	}
	if len(total.Missing) == len(addrs) {
		return total, fmt.Errorf("no scheduler reachable: %w", errors.Join(unreachable...))
	}
	return total, nil
}

// Failures gathers a campaign's failure records from every scheduler, by
// URL (a URL recorded by two schedulers, after a failover, is merged), and
// the total count, which may exceed the list (MaxFailuresReply per
// scheduler).
func Failures(ctx context.Context, addrs []string, token, id, reason string) ([]FailureRecord, int, error) {
	return Client{Token: token}.Failures(ctx, addrs, id, reason)
}

// Failures is the package function Failures over cl.
func (cl Client) Failures(ctx context.Context, addrs []string, id, reason string) ([]FailureRecord, int, error) {
	byURL := map[string]FailureRecord{}
	total := 0
	for _, addr := range addrs {
		c, err := cl.DialControl(ctx, addr)
		if err != nil {
			return nil, 0, err
		}
		fs, n, err := c.Failures(ctx, id, reason)
		c.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("scheduler %s: %w", addr, err)
		}
		total += n - len(fs)
		for _, f := range fs {
			byURL[f.URL] = byURL[f.URL].Merge(f)
		}
	}
	out := make([]FailureRecord, 0, len(byURL))
	for _, f := range byURL {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, total + len(out), nil
}

// DropFailures forgets a campaign's failure records on every scheduler: a
// new run of the campaign starts with none.
func DropFailures(ctx context.Context, addrs []string, token, id string) error {
	return Client{Token: token}.DropFailures(ctx, addrs, id)
}

// DropFailures is the package function DropFailures over cl.
func (cl Client) DropFailures(ctx context.Context, addrs []string, id string) error {
	for _, addr := range addrs {
		c, err := cl.DialControl(ctx, addr)
		if err != nil {
			return err
		}
		_, err = c.do(ctx, Request{Op: OpForget, Campaign: &campaign.Config{ID: id}})
		c.Close()
		if err != nil {
			return fmt.Errorf("scheduler %s: %w", addr, err)
		}
	}
	return nil
}

// endSessionsWithin bounds EndSessions' call to one scheduler, so that a
// scheduler that hangs does not hold back the others' ends.
const endSessionsWithin = 5 * time.Second

// EndSessions ends the campaign's fetcher sessions named by keys on every
// scheduler at once, so that one reconnecting elsewhere is refused too.
// Each scheduler gets endSessionsWithin, whatever the others answer; it
// returns how many sessions were open and every error: a scheduler it
// cannot reach keeps its sessions until their cancellation arrives on a
// heartbeat response.
func (cl Client) EndSessions(ctx context.Context, addrs []string, id string, keys []string) (int, error) {
	ns := make([]int, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, endSessionsWithin)
			defer cancel()
			c, err := cl.DialControl(ctx, addr)
			if err != nil {
				errs[i] = err
				return
			}
			defer c.Close()
			ns[i], errs[i] = c.EndSessions(ctx, id, keys)
		})
	}
	wg.Wait()
	n := 0
	for _, k := range ns {
		n += k
	}
	return n, errors.Join(errs...)
}

// CloseEverywhere closes a campaign (a frontier key,
// campaign.Config.FrontierKey) on every scheduler, in two rounds.
// First each one stops consuming it, finishes recording its outcomes and
// refuses its fetchers from then on; the stats returned add up what each
// knew then. Then, with del, each removes the campaign's queues (the first
// one does; deleting is idempotent) and its own seen marks, so that a new
// run of the same ID starts with a fresh seen-set on every scheduler.
// Deleting only after every scheduler let go means none is still parking
// or publishing into queues that vanish under it; when one could not be
// reached, nothing is deleted, and the campaign's next run removes what
// this one left (each run has its own frontier key, so nothing of it is
// ever taken for the next run's).
func CloseEverywhere(ctx context.Context, addrs []string, token, id string, del bool) (Stats, error) {
	return Client{Token: token}.CloseEverywhere(ctx, addrs, id, del)
}

// CloseEverywhere is the package function CloseEverywhere over cl.
func (cl Client) CloseEverywhere(ctx context.Context, addrs []string, id string, del bool) (Stats, error) {
	return CloseVia(ctx, addrs, func(ctx context.Context, addr string) (CampaignCloser, error) {
		return cl.DialControl(ctx, addr)
	}, id, del)
}

// CampaignCloser closes campaigns on one scheduler (a *Control).
type CampaignCloser interface {
	CloseCampaign(ctx context.Context, id string, del bool) (Stats, error)
	Close() error
}

// CloseVia is CloseEverywhere over the given dial.
func CloseVia(ctx context.Context, addrs []string, dial func(ctx context.Context, addr string) (CampaignCloser, error), id string, del bool) (Stats, error) {
	total := Stats{Campaign: id}
	// Every scheduler is asked, whatever the others answer: one that
	// cannot be reached does not keep the rest from letting go.
	each := func(f func(c CampaignCloser) error) error {
		var errs []error
		for _, addr := range addrs {
			c, err := dial(ctx, addr)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			err = f(c)
			c.Close()
			if err != nil {
				errs = append(errs, fmt.Errorf("scheduler %s: %w", addr, err))
			}
		}
		return errors.Join(errs...)
	}
	err := each(func(c CampaignCloser) error {
		st, err := c.CloseCampaign(ctx, id, false)
		total.Add(st)
		return err
	})
	if err != nil || !del {
		return total, err
	}
	return total, each(func(c CampaignCloser) error {
		_, err := c.CloseCampaign(ctx, id, true)
		return err
	})
}

// ReleaseCampaign closes a campaign on every scheduler and deletes its
// queues and seen marks: what the workflow's Close does, for a campaign
// that ended without running it (terminated).
func ReleaseCampaign(ctx context.Context, addrs []string, token, id string) error {
	return Client{Token: token}.ReleaseCampaign(ctx, addrs, id)
}

// ReleaseCampaign is the package function ReleaseCampaign over cl.
func (cl Client) ReleaseCampaign(ctx context.Context, addrs []string, id string) error {
	_, err := cl.CloseEverywhere(ctx, addrs, id, true)
	return err
}

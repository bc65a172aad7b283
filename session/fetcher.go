package session

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/drover-crawl/drover/campaign"
)

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
	// rules takes FrameRules (Client.Rules; nil: not asked for).
	rules func(campaign.Rules) error

	done    chan struct{}
	closing chan struct{}
	// ended is closed when the scheduler sent FrameEnd.
	ended chan struct{}
	once  sync.Once
	wg    sync.WaitGroup

	closeOnce sync.Once // closes closing
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
	c, fr, fw, w, err := cl.handshake(ctx, addr, Hello{Role: RoleFetcher, Client: client, Campaign: &cfg, Key: key, Recorded: cl.Known != nil, Resolve: cl.Resolves, Rules: cl.Rules != nil})
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
	if w.Rules {
		s.rules = cl.Rules
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
		case FrameRules:
			if err := s.takeRules(t, payload); err != nil {
				s.fail(err)
				return
			}
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

// takeRules hands the rules of a FrameRules to Client.Rules.
func (s *Session) takeRules(t FrameType, payload []byte) error {
	if s.rules == nil {
		return fmt.Errorf("rules frame not asked for: %w", ErrBadFrame)
	}
	var r campaign.Rules
	if err := Decode(t, payload, &r); err != nil {
		return err
	}
	if err := s.rules(r); err != nil {
		return fmt.Errorf("live rules version %d from %s: %w", r.Version, s.welcome.Scheduler, err)
	}
	return nil
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

package frontier

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/drover-crawl/drover/session"
)

// A fetcher's connection: the hello that picks its role, the fetcher
// session's writer and reader, and the dispatch of its frames to the
// campaign's actor.

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
		welcome.Recorded, welcome.Rules, welcome.Incarnation = hello.Recorded, hello.Rules, a.incarnation
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
	// rules: it takes FrameRules (Hello.Rules); rulesVersion is the
	// version of the live rules it has (its config's, then pushed), and
	// includes its config's live includes.
	rules        bool
	rulesVersion int64
	includes     []string
	credit       int
	leases       map[uint64]struct{}
	out          chan outFrame
	quit         chan struct{}
	once         sync.Once
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
		a.post(func() { a.leaser().removeSession(sess) })
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
	sess = &fetcherSession{client: client, key: hello.Key, recorded: hello.Recorded, resolves: hello.Resolve, rules: hello.Rules, rulesVersion: hello.Campaign.Live.Version, includes: hello.Campaign.Live.Include, leases: map[uint64]struct{}{}, out: make(chan outFrame, 1024), quit: make(chan struct{})}
	var err error
	if !a.call(func() { err = a.leaser().addSession(sess) }) {
		err = fmt.Errorf("campaign %s is closing on this scheduler", a.cfg.ID)
	}
	if err != nil {
		_ = fw.WriteFrame(session.FrameRefused, session.Refused{Reason: err.Error(), Ended: errors.Is(err, errSessionEnded) || errors.Is(err, errNarrowerScope)})
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
		a.post(func() { a.outcomes().onOutcomes(sess, os.Items) })
	case session.FramePing:
		a.post(func() { a.leaser().renew(sess) })
		sess.send(session.FramePong, nil)
	default:
		return fmt.Sprintf("unexpected %s frame on a fetcher session", t)
	}
	return ""
}

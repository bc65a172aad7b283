package session

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
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
	// Rules, when set, takes the newer live rules a scheduler pushes to
	// the fetcher sessions dialled (FrameRules): they ask for them. It is
	// called on the session's reader, one frame at a time; an error ends
	// the session.
	Rules func(campaign.Rules) error
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

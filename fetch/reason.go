package fetch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"strings"
	"syscall"

	"github.com/drover-crawl/drover/urlrule"
)

// Failure reasons: one word that says why a URL did not become a page, for
// the failure report and the counts by reason (frontier.Outcome.Reason).
// Fetch and FetchRobots set them in Result.Reason and RobotsResult.Reason;
// Classify derives them from an error.
//
// The first group are connection-level failures: they say nothing about
// the URL and everything about the host, so they come with HostDown (when
// they happened before any byte of a response arrived) and the scheduler
// counts them against the host.
//
// These are not Scope.Allow's reasons (ReasonOutOfScope, ReasonSegments,
// ...), which are phrases; ScopeClass maps those to ReasonScope or
// ReasonTrap.
const (
	// ReasonDNS: the host name did not resolve (no such host, or no DNS
	// answer in time).
	ReasonDNS = "dns"
	// ReasonRefused: the connection was refused (nothing listens).
	ReasonRefused = "refused"
	// ReasonUnreachable: no route to the host or its network.
	ReasonUnreachable = "unreachable"
	// ReasonTimeout: connect, TLS handshake, response head or whole
	// response took longer than its timeout (see Timeouts).
	ReasonTimeout = "timeout"
	// ReasonTLS: the TLS handshake failed (not TLS, bad certificate, an
	// alert from the server, closed during the handshake).
	ReasonTLS = "tls"
	// ReasonReset: the connection was reset or closed by the server.
	ReasonReset = "reset"

	// ReasonProtocol: the server answered something that is not HTTP, or
	// malformed HTTP.
	ReasonProtocol = "protocol"
	// ReasonTooLarge: the response head exceeded the transport's limit.
	ReasonTooLarge = "toolarge"
	// Reason4xx: a 4xx status (a stored page, or 429 to retry).
	Reason4xx = "4xx"
	// Reason5xx: a 5xx status (retried, then stored on the last attempt).
	Reason5xx = "5xx"
	// ReasonRobots: robots.txt disallows the URL, or could not be fetched
	// (the scheduler settles a host's URLs with it).
	ReasonRobots = "robots"
	// ReasonTrap: a trap guard refused the URL (ScopeClass).
	ReasonTrap = "trap"
	// ReasonScope: the URL is out of the campaign's scope (ScopeClass).
	ReasonScope = "scope"
	// ReasonRedirect: a redirect was not followed (hop limit, bad target).
	ReasonRedirect = "redirect"
	// ReasonGuard: the address guard refused every address of the host.
	ReasonGuard = "guard"
	// ReasonInvalid: the URL cannot be parsed or normalized.
	ReasonInvalid = "invalid"
	// ReasonSink: a sink refused the page. Fetch never sets it; the fetch
	// session does, so that every reason word is listed here.
	ReasonSink = "sink"
	// ReasonOther: any other failure.
	ReasonOther = "other"
)

// StatusError is a response whose status asks for a retry (5xx, 429). It
// matches ErrStatus with errors.Is, and its text is ErrStatus's followed by
// the status ("retryable status: 503 Service Unavailable").
type StatusError struct {
	Code   int
	Status string // as in http.Response.Status: "503 Service Unavailable"
}

func (e *StatusError) Error() string { return fmt.Sprintf("%v: %s", ErrStatus, e.Status) }

// Is makes errors.Is(err, ErrStatus) hold.
func (e *StatusError) Is(target error) bool { return target == ErrStatus }

// afterResponse marks a transport error that happened after the first
// byte of the response had arrived: the host is up and speaking, so the
// failure is not the host's (Classify). It leaves the message as it is.
type afterResponse struct{ err error }

func (e *afterResponse) Error() string { return e.err.Error() }
func (e *afterResponse) Unwrap() error { return e.err }

// handshakeError marks an error of the TLS handshake, whatever its type
// (the server closing mid-handshake is a bare io.EOF, a timeout a bare
// context error), and says so in its message.
type handshakeError struct{ err error }

func (e *handshakeError) Error() string { return "tls handshake: " + e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// Classify says why err happened, in one word (a Reason* constant), and
// whether it counts against the host (hostDown): a DNS failure, a refused
// or unreachable connection, a connect or TLS handshake timeout, a
// response-head timeout, a TLS handshake failure, or a reset or EOF before
// any byte of a response. Once a response has begun (an error from Fetch or
// FetchRobots carries that), a timeout or reset is the URL's, not the
// host's. A nil err is ("", false); an error it does not know is
// (ReasonOther, false).
//
// A reset before any response byte may also be a server that crashes on
// one URL; it counts against the host all the same, as the scheduler gives
// a host several tries before failing it.
func Classify(err error) (reason string, hostDown bool) {
	if err == nil {
		return "", false
	}
	var (
		after     = errors.As(err, new(*afterResponse))
		ge        *GuardError
		se        *StatusError
		dnsErr    *net.DNSError
		handshake = errors.As(err, new(*handshakeError))
	)
	switch {
	case errors.As(err, &ge):
		return ReasonGuard, false
	case errors.Is(err, ErrRobots):
		return ReasonRobots, false
	case errors.Is(err, ErrRedirectHops):
		return ReasonRedirect, false
	case errors.Is(err, urlrule.ErrURLTooLong):
		return ReasonTrap, false
	case errors.Is(err, urlrule.ErrInvalidURL), errors.Is(err, urlrule.ErrScheme), errors.Is(err, urlrule.ErrNoHost), errors.Is(err, urlrule.ErrHost):
		return ReasonInvalid, false
	case errors.As(err, &se):
		return statusReason(se.Code), false
	case errors.Is(err, ErrStatus):
		return Reason5xx, false
	case errors.As(err, &dnsErr):
		return ReasonDNS, true
	case errors.Is(err, context.Canceled):
		// The caller gave up; nothing was learnt about the host.
		return ReasonOther, false
	case handshake && isTimeout(err):
		return ReasonTimeout, true
	case handshake || isTLS(err):
		return ReasonTLS, !after
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused, true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN):
		return ReasonUnreachable, true
	case strings.Contains(err.Error(), "server response headers exceeded"):
		// net/http's limit error has no type; its text has been stable
		// since Go 1.7 and a test holds it.
		return ReasonTooLarge, false
	case isTimeout(err):
		return ReasonTimeout, !after
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonReset, !after
	case isMalformed(err):
		return ReasonProtocol, false
	}
	return ReasonOther, false
}

// statusReason is the reason of an HTTP status that is a failure, "" for
// one that is not (1xx, 2xx, 3xx).
func statusReason(code int) string {
	switch {
	case code >= 500:
		return Reason5xx
	case code >= 400:
		return Reason4xx
	}
	return ""
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isTLS(err error) bool {
	var (
		rh  tls.RecordHeaderError
		cv  *tls.CertificateVerificationError
		ua  x509.UnknownAuthorityError
		he  x509.HostnameError
		ci  x509.CertificateInvalidError
		ae  tls.AlertError
		ope *net.OpError
	)
	switch {
	case errors.As(err, &rh), errors.As(err, &cv), errors.As(err, &ua),
		errors.As(err, &he), errors.As(err, &ci), errors.As(err, &ae):
		return true
	case errors.As(err, &ope) && ope.Op == "remote error":
		// crypto/tls reports an alert from the server this way.
		return true
	}
	return false
}

// isMalformed reports an answer that is not HTTP: net/http reports a bad
// status line as an untyped "malformed HTTP ..." error, a bad header line
// as a textproto.ProtocolError.
func isMalformed(err error) bool {
	var pe textproto.ProtocolError
	var bad *http.ProtocolError
	return errors.As(err, &pe) || errors.As(err, &bad) || strings.Contains(err.Error(), "malformed HTTP")
}

// ScopeClass maps a reason Scope.Allow gives to ReasonTrap (the trap
// guards) or ReasonScope (everything else); "" stays "".
func ScopeClass(allowReason string) string {
	switch {
	case allowReason == "":
		return ""
	case strings.HasPrefix(allowReason, "trap:"):
		return ReasonTrap
	case allowReason == urlrule.ReasonInvalidHost:
		return ReasonInvalid
	}
	return ReasonScope
}

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

	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/urlrule"
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
		return page.ReasonGuard, false
	case errors.Is(err, ErrRobots):
		return page.ReasonRobots, false
	case errors.Is(err, ErrRedirectHops):
		return page.ReasonRedirect, false
	case errors.Is(err, urlrule.ErrURLTooLong):
		return page.ReasonTrap, false
	case errors.Is(err, urlrule.ErrInvalidURL), errors.Is(err, urlrule.ErrScheme), errors.Is(err, urlrule.ErrNoHost), errors.Is(err, urlrule.ErrHost):
		return page.ReasonInvalid, false
	case errors.As(err, &se):
		return statusReason(se.Code), false
	case errors.Is(err, ErrStatus):
		return page.Reason5xx, false
	case errors.As(err, &dnsErr):
		return page.ReasonDNS, true
	case errors.Is(err, context.Canceled):
		// The caller gave up; nothing was learnt about the host.
		return page.ReasonOther, false
	case handshake && isTimeout(err):
		return page.ReasonTimeout, true
	case handshake || isTLS(err):
		return page.ReasonTLS, !after
	case errors.Is(err, syscall.ECONNREFUSED):
		return page.ReasonRefused, true
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN):
		return page.ReasonUnreachable, true
	case strings.Contains(err.Error(), "server response headers exceeded"):
		// net/http's limit error has no type; its text has been stable
		// since Go 1.7 and a test holds it.
		return page.ReasonTooLarge, false
	case isTimeout(err):
		return page.ReasonTimeout, !after
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return page.ReasonReset, !after
	case isMalformed(err):
		return page.ReasonProtocol, false
	}
	return page.ReasonOther, false
}

// statusReason is the reason of an HTTP status that is a failure, "" for
// one that is not (1xx, 2xx, 3xx).
func statusReason(code int) string {
	switch {
	case code >= 500:
		return page.Reason5xx
	case code >= 400:
		return page.Reason4xx
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
		return page.ReasonTrap
	case allowReason == urlrule.ReasonInvalidHost:
		return page.ReasonInvalid
	}
	return page.ReasonScope
}

package page

// Failure reasons: one word that says why a URL did not become a page, for
// the failure report and the counts by reason (session.Outcome.Reason).
// fetch.Fetch and FetchRobots set them in Result.Reason and
// RobotsResult.Reason; fetch.Classify derives them from an error.
//
// The first group are connection-level failures: they say nothing about
// the URL and everything about the host, so they come with HostDown (when
// they happened before any byte of a response arrived) and the scheduler
// counts them against the host.
//
// These are not Scope.Allow's reasons (urlrule.ReasonOutOfScope,
// urlrule.ReasonSegments, ...), which are phrases; fetch.ScopeClass maps
// those to ReasonScope or ReasonTrap.
const (
	// ReasonDNS: the host name did not resolve (no such host, or no DNS
	// answer in time).
	ReasonDNS = "dns"
	// ReasonRefused: the connection was refused (nothing listens).
	ReasonRefused = "refused"
	// ReasonUnreachable: no route to the host or its network.
	ReasonUnreachable = "unreachable"
	// ReasonTimeout: connect, TLS handshake, response head or whole
	// response took longer than its timeout (see fetch.Timeouts).
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
	// ReasonNotModified: the server answered 304 Not Modified to a request
	// that carried no validator, so there is no capture it can mean.
	ReasonNotModified = "notmodified"
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

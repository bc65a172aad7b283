package fetch

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/drover-crawl/drover/urlrule"
)

// Timeouts bound the phases of one fetch, so that a host that never
// answers fails in bounded time with page.ReasonTimeout (or page.ReasonDNS) instead
// of holding a fetch slot. Every field must be positive.
type Timeouts struct {
	// DNS bounds resolving the host name.
	DNS time.Duration
	// Connect bounds the TCP connect, over all of the host's addresses
	// together (each gets a share of what is left, as net.Dialer does).
	Connect time.Duration
	// TLSHandshake bounds the TLS handshake of an https URL.
	TLSHandshake time.Duration
	// ResponseHeader bounds the wait for the response head once the
	// request is written.
	ResponseHeader time.Duration
	// Response bounds the whole fetch, body included.
	Response time.Duration
}

// DefaultTimeouts returns DNSTimeout, DialTimeout, TLSHandshakeTimeout,
// ResponseHeaderTimeout and ResponseTimeout.
func DefaultTimeouts() Timeouts {
	return Timeouts{
		DNS:            DNSTimeout,
		Connect:        DialTimeout,
		TLSHandshake:   TLSHandshakeTimeout,
		ResponseHeader: ResponseHeaderTimeout,
		Response:       ResponseTimeout,
	}
}

// Validate names the first field that is not positive.
func (t Timeouts) Validate() error {
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"DNS", t.DNS},
		{"Connect", t.Connect},
		{"TLSHandshake", t.TLSHandshake},
		{"ResponseHeader", t.ResponseHeader},
		{"Response", t.Response},
	} {
		if f.d <= 0 {
			return fmt.Errorf("fetch: Timeouts.%s is %v, must be > 0", f.name, f.d)
		}
	}
	return nil
}

// Option configures a Fetcher beyond its campaign (New).
type Option func(*Fetcher)

// LinkScorer gives a link found on the page of req its score, which the
// "score" priority policy leases highest first (ScoreLinks applies it). It
// must be cheap and safe for concurrent use; it runs for every link of
// every page.
type LinkScorer func(req Request, link string) float64

// InheritScore is the default LinkScorer: a link has its page's score, so
// that what a high-scored seed leads to goes before the rest.
func InheritScore(req Request, _ string) float64 { return req.Score }

// ScoreLinks gives the links a fetch of req found their scores: s's (nil:
// InheritScore), and for a redirect's target its page's score, because it
// is the same item. The fetcher's caller scores, not the Fetcher: a
// Fetcher is shared by a campaign's sessions in a process, a scorer is the
// worker's.
func ScoreLinks(req Request, links []urlrule.Link, s LinkScorer) {
	if s == nil {
		s = InheritScore
	}
	for i, l := range links {
		if l.Hops > 0 {
			links[i].Score = req.Score
		} else {
			links[i].Score = s(req, l.URL)
		}
	}
}

// WithTimeouts replaces DefaultTimeouts; New fails when t is not valid.
// Tests shorten them; an operator may lengthen them for slow networks.
func WithTimeouts(t Timeouts) Option {
	return func(f *Fetcher) { f.timeouts = t }
}

// WithResolver resolves host names with r instead of net.DefaultResolver
// (a DNS server of one's own; tests). Timeouts.DNS still bounds a lookup.
func WithResolver(r *net.Resolver) Option {
	return func(f *Fetcher) { f.resolver = r }
}

// LookupFunc answers the addresses of a host name, as
// net.Resolver.LookupNetIP(ctx, "ip", host) does.
type LookupFunc func(ctx context.Context, host string) ([]netip.Addr, error)

// WithLookup answers host names with lookup instead of the resolver, for
// tests and benchmarks only: they map virtual names (testweb's hostN.sim)
// onto one listener. What lookup answers goes through the address guard
// like any resolver's answer (a loopback listener needs AllowPrivate or
// AllowAddrs), Timeouts.DNS bounds it, and the port stays the URL's. nil
// (the default) resolves with the resolver.
func WithLookup(lookup LookupFunc) Option {
	return func(f *Fetcher) { f.lookup = lookup }
}

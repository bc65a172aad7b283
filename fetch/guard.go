package fetch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// GuardError is a dial the address guard refused: the host resolved only
// to addresses a crawler must not reach from inside a network (loopback,
// private, link-local, cloud metadata...). It is a permanent failure.
type GuardError struct {
	IP    netip.Addr
	Class string // "loopback", "private", "link-local", "metadata", ...
}

func (e *GuardError) Error() string {
	return fmt.Sprintf("address guard: %s is private (%s)", e.IP, e.Class)
}

// refusedPrefixes are the ranges the guard refuses, with their class.
var refusedPrefixes = []struct {
	p     netip.Prefix
	class string
}{
	{netip.MustParsePrefix("169.254.169.254/32"), "metadata"},
	{netip.MustParsePrefix("fd00:ec2::254/128"), "metadata"},
	{netip.MustParsePrefix("0.0.0.0/8"), "unspecified"},
	{netip.MustParsePrefix("10.0.0.0/8"), "private"},
	{netip.MustParsePrefix("100.64.0.0/10"), "cgnat"},
	{netip.MustParsePrefix("127.0.0.0/8"), "loopback"},
	{netip.MustParsePrefix("169.254.0.0/16"), "link-local"},
	{netip.MustParsePrefix("172.16.0.0/12"), "private"},
	{netip.MustParsePrefix("192.168.0.0/16"), "private"},
	{netip.MustParsePrefix("224.0.0.0/4"), "multicast"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved"}, // includes 255.255.255.255
	{netip.MustParsePrefix("::/128"), "unspecified"},
	{netip.MustParsePrefix("::1/128"), "loopback"},
	{netip.MustParsePrefix("fc00::/7"), "private"},
	{netip.MustParsePrefix("fe80::/10"), "link-local"},
	{netip.MustParsePrefix("ff00::/8"), "multicast"},
}

// addrGuard decides which resolved addresses may be dialed.
type addrGuard struct {
	off   bool // cfg.AllowPrivate
	allow map[netip.Addr]bool
}

func newAddrGuard(allowPrivate bool, allowAddrs []string) (*addrGuard, error) {
	g := &addrGuard{off: allowPrivate, allow: map[netip.Addr]bool{}}
	for _, s := range allowAddrs {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("allow_addrs %q: not an IP address: %w", s, err)
		}
		g.allow[a.Unmap()] = true
	}
	return g, nil
}

// check returns a *GuardError when ip must not be dialed.
func (g *addrGuard) check(ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	if g.off || g.allow[ip] {
		return nil
	}
	for _, r := range refusedPrefixes {
		if r.p.Contains(ip) {
			return &GuardError{IP: ip, Class: r.class}
		}
	}
	return nil
}

// control is the last line of defence: it runs on the socket right before
// connect, with the numeric address, whatever path led to the dial.
func (g *addrGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("address guard: cannot parse %q: %w", address, err)
	}
	return g.check(ap.Addr())
}

// guardedDialer resolves a host itself, drops the addresses the guard
// refuses, and dials the remaining ones by IP, so that what is checked is
// what is connected to (no second lookup an attacker's DNS could answer
// differently).
type guardedDialer struct {
	guard    *addrGuard
	dialer   *net.Dialer
	resolver *net.Resolver
	lookup   LookupFunc // nil: resolver
	// resolveTimeout bounds the lookup; connectTimeout bounds the connects
	// to all of the host's addresses together.
	resolveTimeout time.Duration
	connectTimeout time.Duration
}

// minConnectShare is the least time an address gets when several share
// the connect timeout (net.Dialer uses 2 s too).
const minConnectShare = 2 * time.Second

func (d *guardedDialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	allowed, err := d.addrs(ctx, host)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, d.connectTimeout)
	defer cancel()
	var errs []error
	for i, ip := range allowed {
		// Each address gets its share of what is left, so that a first
		// address that drops packets does not use up the whole timeout.
		actx := cctx
		if dl, ok := cctx.Deadline(); ok {
			share := time.Until(dl) / time.Duration(len(allowed)-i)
			if share < minConnectShare && time.Until(dl) > minConnectShare {
				share = minConnectShare
			}
			var acancel context.CancelFunc
			actx, acancel = context.WithTimeout(cctx, share)
			defer acancel()
		}
		c, err := d.dialer.DialContext(actx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if cctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// addrs resolves host (an IP address is its own answer) and keeps the
// addresses the guard allows, in the resolver's order: the order they
// are dialed in.
func (d *guardedDialer) addrs(ctx context.Context, host string) ([]netip.Addr, error) {
	var ips []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		ips = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, d.resolveTimeout)
		if d.lookup != nil {
			ips, err = d.lookup(rctx, host)
		} else {
			ips, err = d.resolver.LookupNetIP(rctx, "ip", host)
		}
		cancel()
		if err != nil {
			return nil, err
		}
	}
	var refused error
	allowed := ips[:0:0]
	for _, ip := range ips {
		if err := d.guard.check(ip); err != nil {
			if refused == nil {
				refused = err
			}
			continue
		}
		allowed = append(allowed, ip)
	}
	if len(allowed) == 0 && refused != nil {
		return nil, refused
	}
	if len(allowed) == 0 {
		return nil, fmt.Errorf("dial %s: no address", host)
	}
	return allowed, nil
}

package campaign

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Politeness keys (Config.PolitenessKey).
const (
	KeyHost   = "host"
	KeyDomain = "domain"
	KeyGroup  = "group"
	// KeyIP keys a host's clock by the IP address its fetcher dialed
	// (IPKey), once a fetcher reported it; until then, and for its
	// shard, by its host name (ClockKey).
	KeyIP = "ip"
)

// IPKey is the politeness key of the hosts served from ip, in a campaign
// keyed by IP: "ip:" and the address as the fetcher reported it.
func IPKey(ip string) string { return "ip:" + ip }

// groupPattern is what a group name may be.
var groupPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ClockKey is the politeness key of host (a URL's host name, lower case,
// without port) in this campaign: the name of the clock that spaces its
// requests on a scheduler, shared with every campaign whose key for its
// hosts is the same, and what the host's shard is a hash of.
//
//   - host: the host name itself;
//   - domain: "domain:" and its registered domain (example.co.uk for
//     www.example.co.uk); an IP address or a public suffix keeps its host
//     key;
//   - group: "group:" and the group PolitenessGroups gives the host name,
//     else its registered domain; a host in no group keeps its host key;
//   - ip: the host name: the IP is known only once a fetcher resolved
//     the host, so the shard stays the host's and the scheduler moves
//     the host to the clock IPKey names when it learns the IP.
func (c Config) ClockKey(host string) string {
	switch c.PolitenessKey {
	case KeyDomain:
		if d := registeredDomain(host); d != "" {
			return "domain:" + d
		}
	case KeyGroup:
		if g, ok := c.PolitenessGroups[host]; ok {
			return "group:" + g
		}
		if d := registeredDomain(host); d != "" {
			if g, ok := c.PolitenessGroups[d]; ok {
				return "group:" + g
			}
		}
	}
	return host
}

// registeredDomain is host's registered domain (eTLD+1), "" for an IP
// address or a name that has none (a public suffix itself).
func registeredDomain(host string) string {
	if _, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return ""
	}
	d, err := publicsuffix.EffectiveTLDPlusOne(strings.TrimSuffix(host, "."))
	if err != nil {
		return ""
	}
	return d
}

// checkPolitenessKey checks PolitenessKey and PolitenessGroups.
func (c Config) checkPolitenessKey() []error {
	var errs []error
	switch c.PolitenessKey {
	case "", KeyHost, KeyDomain, KeyIP:
		if len(c.PolitenessGroups) > 0 {
			errs = append(errs, fmt.Errorf("politeness_groups: used only with politeness_key %q (it is %q)", KeyGroup, c.PolitenessKey))
		}
	case KeyGroup:
		if len(c.PolitenessGroups) == 0 {
			errs = append(errs, fmt.Errorf("politeness_key %q: politeness_groups must map at least one host or domain to a group", KeyGroup))
		}
	default:
		errs = append(errs, fmt.Errorf("politeness_key %q: must be host, domain, group or ip (or unset: host)", c.PolitenessKey))
	}
	for name, g := range c.PolitenessGroups {
		if name == "" || name != strings.ToLower(name) || strings.ContainsAny(name, ":/ ") {
			errs = append(errs, fmt.Errorf("politeness_groups %q: must be a host name or a domain in lower case, without scheme or port", name))
		}
		if !groupPattern.MatchString(g) {
			errs = append(errs, fmt.Errorf("politeness_groups %q: group %q must be 1-64 characters of letters, digits, '.', '_' or '-', starting with a letter or digit", name, g))
		}
	}
	return errs
}

package testweb

import (
	"maps"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// dupPrefix is the directory of the second URLs.
const dupPrefix = "/dup/"

// layout is where the web's pages are: the hosts' IPs and addresses, the
// URL of each generated page and its second URL (Config.Duplicates), and
// which page a URL names. Built at Start and read-only afterwards, it
// needs no lock. Web embeds it, so its methods are Web's.
type layout struct {
	hosts, perHost, duplicates int // Config.Hosts, PagesPerHost, Duplicates

	ips     []string       // by host index
	addrs   []string       // "IP:PORT" by host index
	hostIdx map[string]int // by "IP:PORT", the CDN's (index Hosts) included

	seconds []string          // the second URLs, in (host, page) order
	second  map[string]string // each second URL to its page's URL
}

// newLayout lays out the web of c on port of ips, by host index; an IP
// past c.Hosts is the CDN's.
func newLayout(c Config, ips []string, port int) layout {
	l := layout{
		hosts: c.Hosts, perHost: c.PagesPerHost, duplicates: c.Duplicates,
		ips:     ips[:c.Hosts],
		addrs:   make([]string, c.Hosts),
		hostIdx: make(map[string]int, len(ips)),
		second:  make(map[string]string, c.Duplicates),
	}
	for i, ip := range ips {
		addr := net.JoinHostPort(ip, strconv.Itoa(port))
		l.hostIdx[addr] = i
		if i < c.Hosts {
			l.addrs[i] = addr
		}
	}
	for i := range c.Duplicates {
		h, n := i/(c.PagesPerHost-1), 1+i%(c.PagesPerHost-1)
		u := l.dupURL(h, n)
		l.seconds = append(l.seconds, u)
		l.second[u] = l.pageURL(h, n)
	}
	return l
}

func pagePath(n int) string {
	if n == 0 {
		return "/"
	}
	return "/p/" + strconv.Itoa(n) + ".html"
}

func dupPath(n int) string { return dupPrefix + strconv.Itoa(n) + ".html" }

func (l *layout) pageURL(h, n int) string { return "http://" + l.addrs[h] + pagePath(n) }

// dupURL is the second URL of page n of host h, which hasDup says it has.
func (l *layout) dupURL(h, n int) string { return "http://" + l.addrs[h] + dupPath(n) }

// hasDup reports whether page n of host h is also served at a second URL:
// it is among the first Duplicates non-root pages in (host, page) order.
func (l *layout) hasDup(h, n int) bool {
	return n > 0 && h*(l.perHost-1)+n-1 < l.duplicates
}

// pageIndex returns the host and page number rawURL serves: a page's URL
// or its second URL, with or without a query.
func (l *layout) pageIndex(rawURL string) (h, n int, ok bool) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "http" {
		return 0, 0, false
	}
	h, ok = l.hostIdx[u.Host]
	if !ok || h >= l.hosts {
		return 0, 0, false
	}
	p := u.Path
	switch {
	case p == "/":
		return h, 0, true
	case strings.HasPrefix(p, "/p/") && strings.HasSuffix(p, ".html"):
		n, ok = pageNumber(p[len("/p/") : len(p)-len(".html")])
		return h, n, ok && n < l.perHost
	case strings.HasPrefix(p, dupPrefix) && strings.HasSuffix(p, ".html"):
		n, ok = pageNumber(p[len(dupPrefix) : len(p)-len(".html")])
		return h, n, ok && n < l.perHost && l.hasDup(h, n)
	}
	return 0, 0, false
}

// Seeds returns the root URL of each host, by host index. The CDN of the
// asset mode is not among them.
func (l *layout) Seeds() []string {
	s := make([]string, len(l.addrs))
	for i, a := range l.addrs {
		s[i] = "http://" + a + "/"
	}
	return s
}

// Hosts returns "IP:PORT" of each host, by host index.
func (l *layout) Hosts() []string { return append([]string(nil), l.addrs...) }

// IPs returns the IP of each host, by host index.
func (l *layout) IPs() []string { return append([]string(nil), l.ips...) }

// SecondURLs maps every second URL of Config.Duplicates to the URL of its
// page: the same body and validators at both, the page linking to it.
// It is empty without Duplicates.
func (l *layout) SecondURLs() map[string]string { return maps.Clone(l.second) }

package testweb

import (
	"cmp"
	"fmt"
	"time"
)

// Config describes a test web. In Start and Validate a zero numeric field
// takes its value from DefaultConfig (Base 0 means 10, Port 0 means a free
// port); the booleans are taken as given.
type Config struct {
	// Hosts is the number of hosts, each on its own loopback IP 127.B.x.y.
	Hosts int
	// PagesPerHost is the number of HTML pages per host, the root included.
	PagesPerHost int
	// LinksPerPage is the number of links on every HTML page, NavLinks of
	// them the same on every page of the host.
	LinksPerPage int
	// NavLinks is the number of navigation links; at least 2 (the root and
	// the disallowed page).
	NavLinks int
	// PageBytes is the approximate size of an HTML page; pages are padded
	// with deterministic text up to it.
	PageBytes int
	// CrossHost makes some content links point to pages of other hosts.
	CrossHost bool
	// CrawlDelay maps a host index to the Crawl-delay of its robots.txt.
	CrawlDelay map[int]time.Duration
	// Calendar makes host 0 serve an endless calendar under /calendar/.
	Calendar bool
	// NoExtras leaves out host 0's redirect, 404 and binary resource, so
	// that every host has the same pages (the politeness benchmark's
	// bound assumes it).
	NoExtras bool
	// Assets gives every generated page stylesheets, images, a script and
	// a font on its own host (under /assets/), and an image, a stylesheet
	// and (on host 0's root) an embedded HTML widget on the CDN, one more
	// host outside Seeds; see Assets, OffLimits and the package doc.
	Assets bool
	// Validators gives every generated page (/ and /p/N.html) a
	// validator, an ETag on even pages and a Last-Modified on odd ones,
	// and makes the hosts answer conditional requests for them; see the
	// package doc.
	Validators bool
	// Duplicates is the number of generated pages also served at a second
	// URL, /dup/N.html on their host: the first Duplicates non-root pages
	// in (host, page) order. See SecondURLs.
	Duplicates int
	// LargeBytes, when set, makes host 0 serve /large.bin: LargeBytes bytes
	// of deterministic text, generated as they are sent (never in
	// memory), at LargeURL, with LargeDigest. It is not linked from any
	// page: a test seeds it.
	LargeBytes int64
	// Port is the TCP port on every host IP; 0 picks one free on all of them.
	Port int
	// Base is the second octet of the hosts' addresses, so that two webs
	// can coexist.
	Base byte
}

// Limits checked by Validate.
const (
	maxHosts        = 16384
	maxPagesPerHost = 1_000_000
	maxLinksPerPage = 1000
	maxPageBytes    = 16 << 20
	maxLargeBytes   = 16 << 30
)

// DefaultConfig returns 5 hosts of 400 pages of about 8 KiB with 40 links
// each (10 of them navigation), cross-host links on, no calendar, no
// assets, no validators, no duplicates, a free port and addresses
// 127.10.0.x.
func DefaultConfig() Config {
	return Config{
		Hosts:        5,
		PagesPerHost: 400,
		LinksPerPage: 40,
		NavLinks:     10,
		PageBytes:    8192,
		CrossHost:    true,
		Base:         10,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	c.Hosts = cmp.Or(c.Hosts, d.Hosts)
	c.PagesPerHost = cmp.Or(c.PagesPerHost, d.PagesPerHost)
	c.LinksPerPage = cmp.Or(c.LinksPerPage, d.LinksPerPage)
	c.NavLinks = cmp.Or(c.NavLinks, d.NavLinks)
	c.PageBytes = cmp.Or(c.PageBytes, d.PageBytes)
	c.Base = cmp.Or(c.Base, d.Base)
	return c
}

// Validate reports the first field out of its allowed range, after zero
// fields take their defaults; its message names the field and the range.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Hosts < 1 || c.Hosts > maxHosts:
		return fmt.Errorf("testweb: Hosts is %d, must be in 1..%d", c.Hosts, maxHosts)
	case c.PagesPerHost < 2 || c.PagesPerHost > maxPagesPerHost:
		return fmt.Errorf("testweb: PagesPerHost is %d, must be in 2..%d", c.PagesPerHost, maxPagesPerHost)
	case c.NavLinks < 2:
		return fmt.Errorf("testweb: NavLinks is %d, must be at least 2", c.NavLinks)
	case c.LinksPerPage < c.NavLinks+2 || c.LinksPerPage > maxLinksPerPage:
		return fmt.Errorf("testweb: LinksPerPage is %d, must be in NavLinks+2 (%d)..%d", c.LinksPerPage, c.NavLinks+2, maxLinksPerPage)
	case c.PageBytes < 0 || c.PageBytes > maxPageBytes:
		return fmt.Errorf("testweb: PageBytes is %d, must be in 1..%d", c.PageBytes, maxPageBytes)
	case c.Duplicates < 0 || c.Duplicates > c.Hosts*(c.PagesPerHost-1):
		return fmt.Errorf("testweb: Duplicates is %d, must be in 0..%d (the non-root pages)", c.Duplicates, c.Hosts*(c.PagesPerHost-1))
	case c.LargeBytes < 0 || c.LargeBytes > maxLargeBytes:
		return fmt.Errorf("testweb: LargeBytes is %d, must be in 0..%d", c.LargeBytes, int64(maxLargeBytes))
	case c.Port < 0 || c.Port > 65535:
		return fmt.Errorf("testweb: Port is %d, must be in 0..65535", c.Port)
	}
	for h, d := range c.CrawlDelay {
		if h < 0 || h >= c.Hosts {
			return fmt.Errorf("testweb: CrawlDelay has host index %d, must be in 0..%d", h, c.Hosts-1)
		}
		if d < 0 {
			return fmt.Errorf("testweb: CrawlDelay[%d] is %v, must be >= 0", h, d)
		}
	}
	return nil
}

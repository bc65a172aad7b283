package urlrule

import (
	"bytes"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/drover-crawl/drover/campaign"
)

// RobotsBodyCap is how much of a robots.txt is fetched and parsed: RFC 9309
// asks crawlers to parse at least the first 500 KiB.
const RobotsBodyCap = 500 << 10

// maxRobotsLine is Google's line length limit (8 times the longest URL IE
// accepted); longer lines are cut there.
const maxRobotsLine = 8 * 2083

// MaxSitemaps bounds what one robots.txt can make the crawler remember.
const MaxSitemaps = 1000

// maxCrawlDelay bounds a Crawl-delay so that a hostile value cannot park a
// host forever; the scheduler may cap it further.
const maxCrawlDelay = 24 * time.Hour

// Robots is a host's parsed robots.txt, reduced to the rules that apply to
// drover (campaign.RobotsToken): the groups naming "drover" when there is
// one, the "*" groups otherwise (RFC 9309 section 2.2.1). It is immutable
// and safe for concurrent use.
//
// Parsing and matching follow RFC 9309 and Google's reference parser
// (github.com/google/robotstxt): lines end in CR, LF or CRLF; a UTF-8 BOM
// is skipped; a missing ':' after a known key is tolerated, as are common
// misspellings (useragent, dissallow, ...); rules outside a group are
// ignored; groups of the same agent are merged; a user-agent value counts up
// to its first space and is matched case-insensitively and exactly; the
// longest matching rule wins, Allow on a tie; '*' matches any sequence and a
// final '$' anchors; non-ASCII octets of rules are percent-encoded and
// escapes upper-cased before matching. A line that cannot be understood is
// skipped, never the whole file.
//
// github.com/temoto/robotstxt v1.1.2 was evaluated and is not used: it
// matches wildcard rules unanchored ("Disallow: /fish*.php" blocks
// "/a/fish.php"), picks groups by agent prefix (a "d" group binds
// "drover"), breaks ties by rule order, and rejects a whole file for one
// rule before any user-agent line.
type Robots struct {
	// Unreachable is set when robots.txt could not be fetched (network
	// error, 5xx, 429): everything is disallowed until the caller fetches
	// it again (RFC 9309 section 2.3.1.4).
	Unreachable bool

	allowAll    bool
	disallowAll bool
	rules       []robotsRule
	crawlDelay  time.Duration
	sitemaps    []string
}

type robotsRule struct {
	pattern string // percent-encoding normalized
	allow   bool
}

// ParseRobots interprets the outcome of fetching robots.txt (RFC 9309
// section 2.3.1): 2xx is parsed; 3xx (redirects exhausted) and 4xx other
// than 429 mean "no robots.txt", everything allowed; 429, 5xx, any other
// status and a network error (fetchErr) mean "unreachable", everything
// disallowed (Google treats 429 as a server error too). body beyond
// RobotsBodyCap is ignored.
func ParseRobots(status int, body []byte, fetchErr error) *Robots {
	switch {
	case fetchErr != nil:
		return &Robots{Unreachable: true, disallowAll: true}
	case status >= 200 && status < 300:
		if len(body) > RobotsBodyCap {
			body = body[:RobotsBodyCap]
		}
		return parseRobotsBody(body, campaign.RobotsToken)
	case status >= 300 && status < 400, status >= 400 && status < 500 && status != 429:
		return &Robots{allowAll: true}
	default:
		return &Robots{Unreachable: true, disallowAll: true}
	}
}

// Allowed reports whether drover may fetch target: a path with its query
// as sent in the request line ("/a/b?c=d"), or an absolute URL, whose path
// and query are then used. "/robots.txt" is always allowed.
func (r *Robots) Allowed(target string) bool {
	if r == nil || r.allowAll {
		return true
	}
	path := robotsPath(target)
	if path == "/robots.txt" {
		return true
	}
	if r.disallowAll {
		return false
	}
	best, allow := -1, true
	for _, rule := range r.rules {
		n := len(rule.pattern)
		if n < best || (n == best && allow) {
			continue // cannot win: shorter, or a tie that Allow already holds
		}
		if robotsMatch(rule.pattern, path) {
			best, allow = n, rule.allow
		}
	}
	return allow
}

// CrawlDelay is the Crawl-delay of the groups that apply to drover (the
// largest when several set one), 0 when none does; at most 24h.
func (r *Robots) CrawlDelay() time.Duration {
	if r == nil {
		return 0
	}
	return r.crawlDelay
}

// Sitemaps lists the absolute http(s) URLs of the file's Sitemap lines, in
// order, each once (at most 1000).
func (r *Robots) Sitemaps() []string {
	if r == nil {
		return nil
	}
	return append([]string(nil), r.sitemaps...)
}

// robotsPath extracts the path and query of target and percent-encodes it
// like the rules.
func robotsPath(target string) string {
	if strings.HasPrefix(target, "http://") || strings.HasPrefix(target, "https://") {
		if u, err := url.Parse(target); err == nil {
			target = u.EscapedPath()
			if u.RawQuery != "" {
				target += "?" + u.RawQuery
			}
		}
	}
	if i := strings.IndexByte(target, '#'); i >= 0 {
		target = target[:i]
	}
	if target == "" || target[0] != '/' {
		target = "/" + target
	}
	return escapeRobots(target)
}

// escapeRobots percent-encodes octets outside US-ASCII and controls, and
// upper-cases existing escapes (RFC 9309 section 2.2.2); it decodes none.
func escapeRobots(s string) string {
	return reescape(s, func(c byte) bool { return c <= ' ' || c >= 0x7f }, func(byte) bool { return false })
}

// robotsMatch reports whether pattern matches a prefix of path: '*' matches
// any sequence, a final '$' the end of path. It tracks the set of positions
// in path reachable so far (Google's algorithm), so it runs in
// O(len(pattern) * len(path)) with no backtracking blow-up.
func robotsMatch(pattern, path string) bool {
	if !strings.ContainsAny(pattern, "*$") {
		return strings.HasPrefix(path, pattern)
	}
	// pos holds, ascending, the path offsets where the unmatched rest of
	// the pattern may start.
	pos := make([]int, 1, len(path)+1)
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c == '$' && i == len(pattern)-1 {
			return pos[len(pos)-1] == len(path)
		}
		if c == '*' {
			// Every offset from the smallest one on is reachable.
			first := pos[0]
			pos = pos[:0]
			for p := first; p <= len(path); p++ {
				pos = append(pos, p)
			}
			continue
		}
		next := pos[:0]
		for _, p := range pos {
			if p < len(path) && path[p] == c {
				next = append(next, p+1)
			}
		}
		if len(next) == 0 {
			return false
		}
		pos = next
	}
	return true
}

// robotsKey reads a line's key, tolerating case, misspellings and a
// missing colon; it returns "" for a line to skip.
func robotsKey(k string) string {
	switch strings.ToLower(k) {
	case "user-agent", "useragent", "user agent", "user_agent":
		return "user-agent"
	case "allow":
		return "allow"
	case "disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw":
		return "disallow"
	case "sitemap", "site-map":
		return "sitemap"
	case "crawl-delay", "crawldelay", "crawl delay":
		return "crawl-delay"
	}
	return ""
}

// splitRobotsLine splits a line (comment already removed) into key and
// value; without a ':' the key ends at the first whitespace (Google accepts
// "disallow /").
func splitRobotsLine(line string) (string, string, bool) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", "", false
	}
	if k, v, ok := strings.Cut(line, ":"); ok {
		return strings.TrimSpace(k), strings.TrimSpace(v), true
	}
	i := strings.IndexAny(line, " \t")
	if i < 0 {
		return "", "", false
	}
	return line[:i], strings.TrimSpace(line[i+1:]), true
}

// parseRobotsBody parses a 2xx robots.txt for the product token agent: a
// line scanner (nextRobotsLine) feeds a parser with one handler per key.
func parseRobotsBody(body []byte, agent string) *Robots {
	p := &robotsParser{agent: strings.ToLower(agent), r: &Robots{}, seenSitemap: map[string]bool{}}
	body = trimBOM(body)
	for len(body) > 0 {
		var line []byte
		line, body = nextRobotsLine(body)
		if k, v, ok := splitRobotsLine(string(line)); ok {
			p.handle(k, v)
		}
	}
	return p.result()
}

// nextRobotsLine returns body's first line (cut at maxRobotsLine, its
// comment removed) and the rest; a line ends at CR, LF or CRLF.
func nextRobotsLine(body []byte) (line, rest []byte) {
	if i := bytes.IndexAny(body, "\r\n"); i >= 0 {
		line, rest = body[:i], body[i+1:]
		if body[i] == '\r' && len(rest) > 0 && rest[0] == '\n' {
			rest = rest[1:]
		}
	} else {
		line = body
	}
	if len(line) > maxRobotsLine {
		line = line[:maxRobotsLine]
	}
	if i := bytes.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	return line, rest
}

// robotsGroup is what the groups naming one user-agent say.
type robotsGroup struct {
	rules []robotsRule
	delay time.Duration
}

// robotsParser is the state of parseRobotsBody.
type robotsParser struct {
	agent                string
	r                    *Robots
	mine, star           robotsGroup
	foundMine, foundStar bool
	// The group being read: which of ours it belongs to.
	inMine, inStar, inGroup, lastWasAgent bool
	seenSitemap                           map[string]bool
}

func (p *robotsParser) handle(k, v string) {
	switch key := robotsKey(k); key {
	case "user-agent":
		p.userAgent(v)
	case "allow", "disallow":
		p.lastWasAgent = false
		p.rule(v, key == "allow")
	case "crawl-delay":
		p.lastWasAgent = false
		p.crawlDelay(v)
	case "sitemap":
		// Not a group member: it does not end a run of user-agent lines.
		p.sitemap(v)
	default:
		// Unknown keys are group members of no meaning (RFC 9309 section
		// 2.2.4): they end a run of user-agent lines.
		p.lastWasAgent = false
	}
}

// userAgent starts a group, or adds to the run of user-agent lines that
// starts one.
func (p *robotsParser) userAgent(v string) {
	if !p.lastWasAgent {
		p.inMine, p.inStar = false, false
	}
	p.inGroup, p.lastWasAgent = true, true
	token := v
	if i := strings.IndexAny(token, " \t"); i >= 0 {
		token = token[:i]
	}
	switch strings.ToLower(token) {
	case "*":
		p.inStar, p.foundStar = true, true
	case p.agent:
		p.inMine, p.foundMine = true, true
	}
}

// rule adds an allow or disallow rule to the groups being read.
func (p *robotsParser) rule(v string, allow bool) {
	if !p.inGroup || v == "" {
		return // outside a group, or empty: matches nothing
	}
	rule := robotsRule{pattern: escapeRobots(v), allow: allow}
	if rule.pattern[0] != '/' && rule.pattern[0] != '*' {
		rule.pattern = "/" + rule.pattern
	}
	if p.inMine {
		p.mine.rules = append(p.mine.rules, rule)
	}
	if p.inStar {
		p.star.rules = append(p.star.rules, rule)
	}
}

// crawlDelay keeps the largest Crawl-delay of the groups being read,
// capped at maxCrawlDelay; a value that is not a number is ignored.
func (p *robotsParser) crawlDelay(v string) {
	if !p.inGroup {
		return
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return
	}
	d := maxCrawlDelay
	if f < maxCrawlDelay.Seconds() {
		d = time.Duration(f * float64(time.Second))
	}
	if p.inMine {
		p.mine.delay = max(p.mine.delay, d)
	}
	if p.inStar {
		p.star.delay = max(p.star.delay, d)
	}
}

// sitemap keeps an http(s) sitemap URL, once, up to MaxSitemaps.
func (p *robotsParser) sitemap(v string) {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return
	}
	if !p.seenSitemap[v] && len(p.r.sitemaps) < MaxSitemaps {
		p.seenSitemap[v] = true
		p.r.sitemaps = append(p.r.sitemaps, v)
	}
}

// result applies the groups naming the agent, or else those of "*".
func (p *robotsParser) result() *Robots {
	r := p.r
	switch {
	case p.foundMine:
		r.rules, r.crawlDelay = p.mine.rules, p.mine.delay
	case p.foundStar:
		r.rules, r.crawlDelay = p.star.rules, p.star.delay
	}
	if len(r.rules) == 0 {
		r.allowAll = true
	}
	return r
}

// trimBOM skips a UTF-8 byte order mark, or a leading part of one.
func trimBOM(b []byte) []byte {
	for _, c := range []byte{0xEF, 0xBB, 0xBF} {
		if len(b) == 0 || b[0] != c {
			break
		}
		b = b[1:]
	}
	return b
}

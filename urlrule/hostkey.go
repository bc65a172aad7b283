package urlrule

import (
	"fmt"
	"net/url"
	"strings"
)

// HostKey returns the lower-case host name of rawURL without its port (the
// key of scope and politeness), in its IDNA ASCII form.
func HostKey(rawURL string) (string, error) { return hostKey(rawURL, false) }

// HTTPHostKey is HostKey for an http or https URL: ErrScheme for any other
// scheme. The scheduler reads the host of every link and every delivered
// URL with it.
func HTTPHostKey(rawURL string) (string, error) { return hostKey(rawURL, true) }

// hostKey is HostKey, refusing schemes other than http and https when
// httpOnly: by hostKeyFast for a URL in Normalize's form, by the parse
// otherwise.
func hostKey(rawURL string, httpOnly bool) (string, error) {
	if h, ok := hostKeyFast(rawURL); ok {
		return h, nil
	}
	u, err := parseTrimmed(rawURL)
	if err != nil {
		return "", err
	}
	if s := strings.ToLower(u.Scheme); httpOnly && s != "http" && s != "https" {
		return "", ErrScheme
	}
	return normalHost(u.Hostname())
}

// hostKeyFast returns the host key of a URL in the form Normalize writes
// ("http://" or "https://", a lower-case ASCII host name, an optional port,
// then path, query and fragment), without parsing it: the scheduler reads
// the host of every URL a fetcher reports, and a full url.Parse with its
// allocations was a fifth of its CPU. ok is false for anything else, which
// takes the parsing path; when ok, the result is what that path returns
// (FuzzHostKeyFast holds the two equal): so every input that url.Parse
// refuses, and every host that normalHost would change or refuse, is left to
// it.
func hostKeyFast(s string) (host string, ok bool) {
	host, _, ok = splitFast(s)
	return host, ok
}

// Origin returns the scheme, host and port of rawURL as url.Parse reads
// them ("http://e.com:8080"), the key of a host's failures by origin; ""
// when rawURL does not parse. A URL in Normalize's form is not parsed.
func Origin(rawURL string) string {
	if _, origin, ok := splitFast(rawURL); ok {
		return origin
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// splitFast is hostKeyFast, with the URL's origin (its prefix up to the
// path) beside the host.
func splitFast(s string) (host, origin string, ok bool) {
	rest, found := strings.CutPrefix(s, "http://")
	if !found {
		if rest, found = strings.CutPrefix(s, "https://"); !found {
			return "", "", false
		}
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	authority := rest[:end]
	host = authority
	if i := strings.IndexByte(authority, ':'); i >= 0 {
		host = authority[:i]
		for _, c := range []byte(authority[i+1:]) {
			if c < '0' || c > '9' {
				return "", "", false // not a port url.Parse accepts (or a second colon)
			}
		}
	}
	if host == "" || host[0] == '.' || host[len(host)-1] == '.' ||
		strings.Contains(host, "..") || strings.Contains(host, "xn--") {
		return "", "", false
	}
	for _, c := range []byte(host) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", "", false
		}
	}
	// What url.Parse refuses after the authority: a control byte, or a '%'
	// not followed by two hex digits (in the path and fragment). Spaces
	// are left to TrimURL's path too.
	tail := rest[end:]
	for i := 0; i < len(tail); i++ {
		switch c := tail[i]; {
		case c <= ' ' || c == 0x7f:
			return "", "", false
		case c == '%':
			if i+2 >= len(tail) || !ishex(tail[i+1]) || !ishex(tail[i+2]) {
				return "", "", false
			}
		}
	}
	return host, s[:len(s)-len(rest)+end], true
}

// parseTrimmed parses rawURL after TrimURL, its error an ErrInvalidURL.
func parseTrimmed(rawURL string) (*url.URL, error) {
	u, err := url.Parse(TrimURL(rawURL))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidURL, UnwrapURLError(err))
	}
	return u, nil
}

// RobotsPath returns the path and query of rawURL as robots.txt rules
// match them: the escaped path ("/" when empty), then "?" and the query
// when there is one; "/" when rawURL does not parse. A URL in Normalize's
// form is not parsed.
func RobotsPath(rawURL string) string {
	if _, origin, ok := splitFast(rawURL); ok {
		rest := rawURL[len(origin):]
		if i := strings.IndexByte(rest, '#'); i >= 0 {
			rest = rest[:i]
		}
		path, query, _ := strings.Cut(rest, "?")
		if plainPath(path) {
			switch {
			case path == "" && query == "":
				return "/"
			case path == "":
				return "/?" + query
			case query == "":
				return path
			}
			return rest
		}
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "/"
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	return p
}

// plainPath reports whether url.URL.EscapedPath gives path back as it is:
// every byte is one a path may hold unescaped, or a '%' (splitFast has
// checked that each starts a valid escape).
func plainPath(path string) bool {
	for i := 0; i < len(path); i++ {
		c := path[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-._~/!$&'()*+,;=:@%", c) >= 0) {
			return false
		}
	}
	return true
}

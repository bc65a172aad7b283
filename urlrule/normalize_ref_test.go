package urlrule

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// The reference normalizer: Normalize and the helpers as they were before their allocations were cut
// for speed, as they were before, renamed with a ref prefix; it calls
// ResolveReference where Normalize now calls resolve.
// FuzzNormalizeMatchesReference holds Normalize to it.

func refNormalize(raw string, base *url.URL, dropParams []string) (string, error) {
	raw = refTrimURL(raw)
	if len(raw) > MaxURLLength {
		return "", ErrURLTooLong
	}
	if raw == "" && base == nil {
		return "", fmt.Errorf("%w: empty", ErrInvalidURL)
	}
	raw = refFixBackslashes(raw)
	raw = refFixPercents(raw)
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidURL, UnwrapURLError(err))
	}
	if base != nil {
		u = base.ResolveReference(u)
	}
	return refNormalizeURL(u, dropParams)
}

func refNormalizeURL(u *url.URL, dropParams []string) (string, error) {
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", ErrScheme
	}
	if u.Opaque != "" {
		return "", ErrNoHost
	}
	host, err := normalHost(u.Hostname())
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 {
			return "", fmt.Errorf("%w: port %q", ErrHost, port)
		}
		port = strconv.Itoa(n) // drops leading zeros
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = ""
		}
	}

	var b strings.Builder
	b.Grow(len(scheme) + len(host) + len(u.RawPath) + len(u.Path) + len(u.RawQuery) + 16)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	path := refRemoveDotSegments(normalEscapes(u.EscapedPath(), false))
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	b.WriteString(path)
	if q := normalQuery(u.RawQuery, dropParams); q != "" {
		b.WriteByte('?')
		b.WriteString(q)
	}
	if b.Len() > MaxURLLength {
		return "", ErrURLTooLong
	}
	return b.String(), nil
}

func refTrimURL(s string) string {
	s = strings.TrimFunc(s, func(r rune) bool { return r <= ' ' })
	if strings.ContainsAny(s, "\t\n\r") {
		s = strings.NewReplacer("\t", "", "\n", "", "\r", "").Replace(s)
	}
	return s
}

func refFixBackslashes(s string) string {
	end := strings.IndexAny(s, "?#")
	if end < 0 {
		end = len(s)
	}
	if !strings.Contains(s[:end], `\`) {
		return s
	}
	return strings.ReplaceAll(s[:end], `\`, "/") + s[end:]
}

func refFixPercents(s string) string {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && !(i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2])) {
			b.WriteString("%25")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// refRemoveDotSegments is the old guard (any '.') around the loop that
// removeDotSegments still runs.
func refRemoveDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	if r := removeDotSegments(p); strings.HasPrefix(r, "/") {
		return r
	}
	return "/" + removeDotSegments(p)
}

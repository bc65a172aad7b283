package urlrule

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The reference normalizer: Normalize and the helpers it rewrites for
// speed, as they were before issue 15's fast paths, renamed with a ref
// prefix. FuzzNormalizeMatchesReference holds Normalize to it.

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
	path := refRemoveDotSegments(refNormalEscapes(u.EscapedPath(), false))
	if path == "" || path[0] != '/' {
		path = "/" + path
	}
	b.WriteString(path)
	if q := refNormalQuery(u.RawQuery, dropParams); q != "" {
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

func refNormalEscapes(s string, query bool) string {
	return refReescape(s, func(c byte) bool { return c == '%' || mustEscape(c, query) }, unreserved)
}

func refReescape(s string, escape, decode func(byte) bool) string {
	need := false
	for i := 0; i < len(s); i++ {
		if s[i] == '%' || escape(s[i]) {
			need = true
			break
		}
	}
	if !need {
		return s
	}
	const hex = "0123456789ABCDEF"
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '%' && i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2]):
			d := unhex(s[i+1])<<4 | unhex(s[i+2])
			if decode(d) {
				b = append(b, d)
			} else {
				b = append(b, '%', hex[d>>4], hex[d&15])
			}
			i += 2
		case escape(c):
			b = append(b, '%', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return string(b)
}

func refNormalQuery(q string, drop []string) string {
	if q == "" {
		return ""
	}
	if len(drop) == 0 {
		return refNormalEscapes(q, true)
	}
	parts := strings.Split(q, "&")
	kept := parts[:0]
	for _, p := range parts {
		name, _, _ := strings.Cut(p, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if name != "" && slices.Contains(drop, name) {
			continue
		}
		kept = append(kept, refNormalEscapes(p, true))
	}
	q = strings.Join(kept, "&")
	if strings.Trim(q, "&") == "" {
		return ""
	}
	return q
}

func refRemoveDotSegments(p string) string {
	if !strings.Contains(p, ".") {
		return p
	}
	in := strings.Split(p, "/")
	out := make([]string, 0, len(in))
	for i, seg := range in {
		last := i == len(in)-1
		switch seg {
		case ".":
			if last {
				out = append(out, "")
			}
		case "..":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, seg)
		}
	}
	r := strings.Join(out, "/")
	if !strings.HasPrefix(r, "/") {
		r = "/" + r
	}
	return r
}

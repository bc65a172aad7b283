package urlrule

import (
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// MaxURLLength is the longest URL, in bytes, that Normalize accepts: longer
// ones are almost always generated (session IDs piled up, recursive query
// strings) and are refused as a trap guard, before and after normalization.
const MaxURLLength = 2048

// Errors of Normalize and HostKey; callers tell them apart with errors.Is.
var (
	// ErrURLTooLong: the URL is longer than MaxURLLength.
	ErrURLTooLong = errors.New("url longer than 2048 bytes")
	// ErrScheme: the URL is not http or https (mailto:, javascript:, data:...).
	ErrScheme = errors.New("not an http or https url")
	// ErrNoHost: the URL has no host.
	ErrNoHost = errors.New("url has no host")
	// ErrHost: the host is not a valid host name, IDNA name or IP literal.
	ErrHost = errors.New("invalid host")
	// ErrInvalidURL: the URL cannot be parsed at all.
	ErrInvalidURL = errors.New("invalid url")
)

// idnaProfile converts internationalized host names to their ASCII form.
// It is the lookup profile without STD3 and hyphen checks, because names
// with '_' or "--" in the third and fourth positions resolve and are served
// on the real web (as browsers accept them).
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.StrictDomainName(false),
	idna.CheckHyphens(false),
	idna.CheckJoiners(true),
	idna.BidiRule(),
	idna.VerifyDNSLength(true),
)

// Normalize resolves raw against base (nil for an absolute URL) and returns
// its normal form, the key for dedup:
//   - scheme and host lower-cased, internationalized hosts in their IDNA
//     ASCII form, IPv6 literals in their canonical form, a single trailing
//     dot of the host removed, default ports (:80 for http, :443 for https)
//     removed, user information dropped;
//   - dot segments resolved, an empty path becomes "/", '\' in the path read
//     as '/' (as browsers do for http and https);
//   - percent-encoding normalized in path and query: hex digits upper-cased,
//     unreserved characters decoded, characters that may not appear raw
//     (space, non-ASCII bytes, controls, "<>\"^`{|}") encoded, and a '%'
//     that starts no valid escape encoded as %25;
//   - query parameters named in dropParams removed (by their decoded name,
//     exact match), the order of the others kept; an empty query and the
//     fragment are dropped.
//
// It refuses (with the errors above) anything but http and https, an empty
// or invalid host (including invalid IDNA), and URLs longer than
// MaxURLLength before or after normalization.
func Normalize(raw string, base *url.URL, dropParams []string) (string, error) {
	raw = TrimURL(raw)
	if len(raw) > MaxURLLength {
		return "", ErrURLTooLong
	}
	if raw == "" && base == nil {
		return "", fmt.Errorf("%w: empty", ErrInvalidURL)
	}
	raw = fixBackslashes(raw)
	raw = fixPercents(raw)
	if base != nil {
		if p, ok := resolvePathRef(base, raw); ok {
			return normalizeParts(p, dropParams)
		}
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidURL, UnwrapURLError(err))
	}
	if base != nil {
		return normalizeParts(resolve(base, u), dropParams)
	}
	return normalizeURL(u, dropParams)
}

// normalizeURL is Normalize on a parsed, absolute URL.
func normalizeURL(u *url.URL, dropParams []string) (string, error) {
	return normalizeParts(urlParts{
		scheme: u.Scheme, opaque: u.Opaque, host: u.Host,
		path: u.EscapedPath(), query: u.RawQuery,
	}, dropParams)
}

// normalizeParts is Normalize on the parts of a parsed, absolute URL.
func normalizeParts(u urlParts, dropParams []string) (string, error) {
	scheme := strings.ToLower(u.scheme)
	if scheme != "http" && scheme != "https" {
		return "", ErrScheme
	}
	if u.opaque != "" {
		return "", ErrNoHost
	}
	hp := url.URL{Host: u.host}
	host, err := fastHost(hp.Hostname())
	if err != nil {
		return "", err
	}
	port := hp.Port()
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n <= 0 || n > 65535 {
			return "", fmt.Errorf("%w: port %q", ErrHost, port)
		}
		if port[0] == '0' { // url.Parse let only digits through
			port = strconv.Itoa(n) // drops leading zeros
		}
		if (scheme == "http" && n == 80) || (scheme == "https" && n == 443) {
			port = ""
		}
	}

	var b strings.Builder
	b.Grow(len(scheme) + len(host) + len(u.path) + len(u.query) + 16)
	b.WriteString(scheme)
	b.WriteString("://")
	b.WriteString(host)
	if port != "" {
		b.WriteByte(':')
		b.WriteString(port)
	}
	path := removeDotSegments(normalEscapes(u.path, false))
	if path == "" || path[0] != '/' {
		b.WriteByte('/')
	}
	b.WriteString(path)
	if q := normalQuery(u.query, dropParams); q != "" {
		b.WriteByte('?')
		b.WriteString(q)
	}
	if b.Len() > MaxURLLength {
		return "", ErrURLTooLong
	}
	return b.String(), nil
}

// normalHost lower-cases h, converts it to IDNA ASCII, canonicalizes IP
// literals and checks its characters.
func normalHost(h string) (string, error) {
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", ErrNoHost
	}
	if strings.Contains(h, ":") { // IPv6 literal (Hostname strips the brackets)
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			return "", fmt.Errorf("%w: %q", ErrHost, h)
		}
		return "[" + a.String() + "]", nil
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if !ascii || strings.Contains(strings.ToLower(h), "xn--") {
		a, err := idnaProfile.ToASCII(h)
		if err != nil {
			return "", fmt.Errorf("%w: %q: %v", ErrHost, h, err)
		}
		h = a
	}
	h = strings.ToLower(h)
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return "", fmt.Errorf("%w: %q", ErrHost, h)
		}
	}
	if strings.Contains(h, "..") || h[0] == '.' {
		return "", fmt.Errorf("%w: %q (empty label)", ErrHost, h)
	}
	return h, nil
}

// TrimURL removes what HTML attribute values carry around URLs: leading
// and trailing spaces and controls, and tabs and newlines anywhere (as the
// WHATWG URL parser does).
//
// It works on bytes: a rune <= ' ' is one byte, and no byte of a
// multi-byte (or invalid) UTF-8 sequence is <= ' '.
func TrimURL(s string) string {
	i, j := 0, len(s)
	for i < j && s[i] <= ' ' {
		i++
	}
	for j > i && s[j-1] <= ' ' {
		j--
	}
	s = s[i:j]
	for k := 0; k < len(s); k++ {
		if c := s[k]; c == '\t' || c == '\n' || c == '\r' {
			return urlSpaces.Replace(s)
		}
	}
	return s
}

// urlSpaces removes what TrimURL removes inside a URL.
var urlSpaces = strings.NewReplacer("\t", "", "\n", "", "\r", "")

// fixBackslashes reads '\' as '/' before the query, as browsers do for
// http and https URLs.
func fixBackslashes(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	end := strings.IndexAny(s, "?#")
	if end < 0 {
		end = len(s)
	}
	if !strings.Contains(s[:end], `\`) {
		return s
	}
	return strings.ReplaceAll(s[:end], `\`, "/") + s[end:]
}

// fixPercents encodes a '%' that starts no valid escape as "%25", so that
// url.Parse accepts what browsers accept.
func fixPercents(s string) string {
	if !hasBadPercent(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && !(i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2])) {
			b.WriteString("%25")
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// hasBadPercent reports whether s has a '%' that starts no valid escape.
func hasBadPercent(s string) bool {
	for {
		i := strings.IndexByte(s, '%')
		if i < 0 {
			return false
		}
		if !(i+2 < len(s) && ishex(s[i+1]) && ishex(s[i+2])) {
			return true
		}
		s = s[i+3:]
	}
}

// normalEscapes normalizes the percent-encoding of an escaped path (or, when
// query is set, of one query component, where '+' keeps its meaning): an
// escaped unreserved octet is decoded, a '%' that starts no escape and an
// octet that may not appear raw are escaped.
func normalEscapes(s string, query bool) string {
	return reescape(s, func(c byte) bool { return c == '%' || mustEscape(c, query) }, unreserved)
}

// reescape rewrites the percent-encoding of s: a valid escape of an octet
// that decode accepts becomes that octet, any other valid escape is
// upper-cased, and a byte that escape selects (a '%' that starts no valid
// escape included) is percent-encoded; the rest is kept. s comes back as it
// is when it has neither a '%' nor a byte to escape.
func reescape(s string, escape, decode func(byte) bool) string {
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

// mustEscape reports whether c may not appear raw in a path or query.
func mustEscape(c byte, query bool) bool {
	if c <= ' ' || c >= 0x7f {
		return true
	}
	switch c {
	case '"', '<', '>', '\\', '^', '`', '{', '|', '}':
		return true
	case '#':
		return true
	case '?':
		return !query
	}
	return false
}

func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

func ishex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// normalQuery normalizes each '&'-separated parameter and drops those whose
// decoded name is in drop.
func normalQuery(q string, drop []string) string {
	if q == "" {
		return ""
	}
	if len(drop) == 0 {
		return normalEscapes(q, true)
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
		kept = append(kept, normalEscapes(p, true))
	}
	q = strings.Join(kept, "&")
	if strings.Trim(q, "&") == "" {
		return ""
	}
	return q
}

// removeDotSegments is RFC 3986 section 5.2.4 on an absolute path.
func removeDotSegments(p string) string {
	if !hasDotSegment(p) {
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

// hasDotSegment reports whether one of p's '/'-separated segments is "."
// or "..": without one, removeDotSegments has nothing to remove (most
// paths have a dot only in a file name, as "/p/1.html").
func hasDotSegment(p string) bool {
	if p == "" || p[0] != '.' && !strings.Contains(p, "/.") {
		return false // a dot segment starts p or follows a '/'
	}
	for p != "" {
		seg, rest, _ := strings.Cut(p, "/")
		if seg == "." || seg == ".." {
			return true
		}
		p = rest
	}
	return false
}

// UnwrapURLError strips url.Error's "<op> <url>:" prefix (url.Parse's
// "parse", an HTTP client's "Get"), which would repeat a possibly huge URL
// in every message.
func UnwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

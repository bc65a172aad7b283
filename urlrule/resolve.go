package urlrule

import (
	"bytes"
	"net/url"
	"strings"
)

// urlParts is what normalization reads of an absolute URL: its scheme,
// opaque part, host (with the port), escaped path and raw query.
type urlParts struct {
	scheme, opaque, host, path, query string
}

// resolve is base.ResolveReference(ref) reduced to the parts Normalize
// reads. ResolveReference copies the URL to the heap and unescapes the
// resolved path into it, which normalization then escapes again; this
// keeps the escaped path as it is (two of Normalize's five
// allocations per link). FuzzNormalizeMatchesReference holds Normalize
// to the reference normalizer, which calls ResolveReference.
func resolve(base, ref *url.URL) urlParts {
	p := urlParts{scheme: ref.Scheme, opaque: ref.Opaque, host: ref.Host, query: ref.RawQuery}
	if ref.Scheme == "" {
		p.scheme = base.Scheme
	}
	if ref.Scheme != "" || ref.Host != "" || ref.User != nil {
		p.path = resolvePath(ref.EscapedPath(), "")
		return p
	}
	if ref.Opaque != "" {
		p.host = ""
		return p
	}
	if ref.Path == "" && !ref.ForceQuery && ref.RawQuery == "" {
		p.query = base.RawQuery
	}
	if ref.Path == "" && base.Opaque != "" {
		p.opaque, p.host = base.Opaque, ""
		return p
	}
	p.host = base.Host
	p.path = resolvePath(base.EscapedPath(), ref.EscapedPath())
	return p
}

// resolvePathRef is resolve for a reference that is a plain path, with a
// query and a fragment or not ("p/17.html", "../p/17.html?x=1#top",
// "/a/b"), read without url.Parse; ok is false for any other reference,
// which takes url.Parse's way. The path's bytes are letters, digits and
// "-._~/" (no scheme, no escapes, nothing url.Parse would escape), it does
// not start with "//" (an authority), and the query and fragment have
// only printable ASCII, no '%' in the fragment: for such a reference
// url.Parse sets just Path (which EscapedPath returns as it is), RawQuery
// and Fragment, and ResolveReference takes the base's scheme and host.
func resolvePathRef(base *url.URL, raw string) (p urlParts, ok bool) {
	rest, frag, _ := strings.Cut(raw, "#")
	path, query, _ := strings.Cut(rest, "?")
	if path == "" || strings.HasPrefix(path, "//") {
		return urlParts{}, false
	}
	for i := 0; i < len(path); i++ {
		c := path[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
			return urlParts{}, false
		}
	}
	if !printable(query) || !printable(frag) || strings.IndexByte(frag, '%') >= 0 {
		return urlParts{}, false
	}
	return urlParts{
		scheme: base.Scheme, host: base.Host, query: query,
		path: resolvePath(base.EscapedPath(), path),
	}, true
}

// printable reports whether s has only printable ASCII, space excluded.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// resolvePath is net/url's resolvePath (Go 1.26, BSD licence), which
// ResolveReference uses and does not export: RFC 3986 section 5.2's merge
// of an escaped reference path with its base's, dot segments removed. One
// fast path is added: an absolute path without dot segments comes back as
// it is.
func resolvePath(base, ref string) string {
	var full string
	if ref == "" {
		full = base
	} else if ref[0] != '/' {
		i := strings.LastIndex(base, "/")
		full = base[:i+1] + ref
	} else {
		full = ref
	}
	if full == "" {
		return ""
	}
	if full[0] == '/' && !hasDotSegment(full) {
		return full // what the loop below would build, allocated
	}

	dst := make([]byte, 0, len(full)+1)
	dst = append(dst, '/')
	elem := ""
	remaining := full
	found := true
	first := true
	for found {
		elem, remaining, found = strings.Cut(remaining, "/")
		switch elem {
		case ".":
			first = false
			continue
		case "..":
			if i := bytes.LastIndexByte(dst[1:], '/'); i >= 0 {
				dst = dst[:i+1]
			} else {
				dst = dst[:1]
			}
			first = len(dst) == 1
		default:
			if !first {
				dst = append(dst, '/')
			}
			dst = append(dst, elem...)
			first = false
		}
	}

	if elem == "." || elem == ".." {
		dst = append(dst, '/')
	}

	// We wrote an initial '/', but we don't want two.
	if len(dst) > 1 && dst[1] == '/' {
		return string(dst[1:])
	}
	return string(dst)
}

// fastHost is normalHost, with a fast path for the common host that is
// already in normal form: lower-case ASCII letters, digits, '-', '.' and
// '_', no IDNA ("xn--") label, no empty label. normalHost lower-cases and
// scans such a host several times, twice per link (Normalize, then the
// scope check).
func fastHost(h string) (string, error) {
	if h == "" || h[0] == '.' || h[len(h)-1] == '.' {
		return normalHost(h)
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.' && h[i-1] != '.') {
			return normalHost(h)
		}
	}
	if strings.Contains(h, "xn--") {
		return normalHost(h)
	}
	return h, nil
}

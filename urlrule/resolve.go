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
// keeps the escaped path as it is (issue 15: two of Normalize's five
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

package fetch

import (
	"strings"

	"github.com/drover-crawl/drover/campaign"
)

// hasToken reports whether the space-separated list has tok (ASCII
// case-insensitive), as for rel values.
func hasToken(list, tok string) bool {
	for t := range strings.FieldsSeq(list) {
		if strings.EqualFold(t, tok) {
			return true
		}
	}
	return false
}

// robotsDirectives reads a robots meta content or X-Robots-Tag value.
func robotsDirectives(v string) (noIndex, noFollow bool) {
	for _, d := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		switch strings.ToLower(d) {
		case "noindex":
			noIndex = true
		case "nofollow":
			noFollow = true
		case "none":
			noIndex, noFollow = true, true
		}
	}
	return noIndex, noFollow
}

// xRobotsTag reads X-Robots-Tag values; a value for another crawler
// ("otherbot: noindex") is ignored, one for drover or for all applies.
func xRobotsTag(values []string) (noIndex, noFollow bool) {
	for _, v := range values {
		if agent, rest, ok := strings.Cut(v, ":"); ok {
			a := strings.ToLower(strings.TrimSpace(agent))
			if !strings.ContainsAny(a, " ,") && !strings.HasPrefix(a, "unavailable_after") && !strings.HasPrefix(a, "max-") {
				if a != campaign.RobotsToken {
					continue
				}
				v = rest
			}
		}
		ni, nf := robotsDirectives(v)
		noIndex, noFollow = noIndex || ni, noFollow || nf
	}
	return noIndex, noFollow
}

// refreshURL extracts the URL of a meta refresh content ("5; url=/next",
// "0;URL='/next'"), "" when there is none.
func refreshURL(content string) string {
	_, rest, ok := strings.Cut(content, ";")
	if !ok {
		if _, rest, ok = strings.Cut(content, ","); !ok {
			return ""
		}
	}
	rest = strings.TrimSpace(rest)
	if len(rest) >= 3 && strings.EqualFold(rest[:3], "url") {
		r := strings.TrimSpace(rest[3:])
		if strings.HasPrefix(r, "=") {
			rest = strings.TrimSpace(r[1:])
		}
	}
	if len(rest) > 0 && (rest[0] == '\'' || rest[0] == '"') {
		q := rest[0]
		rest = rest[1:]
		if i := strings.IndexByte(rest, q); i >= 0 {
			rest = rest[:i]
		}
	}
	return strings.TrimSpace(rest)
}

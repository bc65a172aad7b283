package fetch

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/tdewolff/parse/v2"
	"github.com/tdewolff/parse/v2/css"
)

// Embeds are what a page needs to render: its images, stylesheets,
// scripts, media, and what its stylesheets load in turn. A crawl fetches
// them so that its archive replays the page, and marks them as embeds
// (urlrule.Link.Embeds), which may leave the campaign's scope for a few
// hops (campaign.Config.EmbedHops) while links may not.
//
// CSS is read with tdewolff/parse's lexer (a tokenizer that follows CSS
// Syntax Level 3, kept by the author of tdewolff/minify), which knows
// comments, strings and escapes; a regular expression for url() would
// find URLs in comments and miss escaped ones.

// embedsOf adds the embeds of one tag to s.
func embedsOf(t tag, s *urlSet) {
	switch t.name {
	case "img", "source":
		s.add(t.attrOr("src"))
		for _, u := range srcsetURLs(t.attrOr("srcset")) {
			s.add(u)
		}
	case "script", "audio", "track", "embed":
		s.add(t.attrOr("src"))
	case "video":
		s.add(t.attrOr("src"))
		s.add(t.attrOr("poster"))
	case "object":
		s.add(t.attrOr("data"))
	case "link":
		if isEmbedRel(t.attrOr("rel")) {
			s.add(t.attrOr("href"))
		}
	case "style":
		cssURLs([]byte(t.attrOr(cssText)), s)
	}
	if v, ok := t.attr("style"); ok && t.name != "style" {
		cssURLs([]byte(v), s)
	}
}

// isEmbedRel reports whether a link's rel names something the page loads
// to render: a stylesheet (an alternate one too), an icon (also "shortcut
// icon" and "apple-touch-icon"), or a preload.
func isEmbedRel(rel string) bool {
	for t := range strings.FieldsSeq(rel) {
		switch strings.ToLower(t) {
		case "stylesheet", "icon", "apple-touch-icon", "preload", "modulepreload":
			return true
		}
	}
	return false
}

// srcsetURLs returns the image URLs of a srcset attribute, as the HTML
// standard's "parse a srcset attribute" splits it: candidates separated by
// commas, each a URL (a run of non-space characters, whose trailing commas
// end the candidate) and optional descriptors ("2x", "480w"), in which a
// comma inside parentheses does not end the candidate.
func srcsetURLs(v string) []string {
	var out []string
	for i := 0; i < len(v); {
		for i < len(v) && (isHTMLSpace(v[i]) || v[i] == ',') {
			i++
		}
		start := i
		for i < len(v) && !isHTMLSpace(v[i]) {
			i++
		}
		u := v[start:i]
		if trimmed := strings.TrimRight(u, ","); trimmed != u {
			// "a.png," ends its candidate: no descriptors.
			if trimmed != "" {
				out = append(out, trimmed)
			}
			continue
		}
		if u != "" {
			out = append(out, u)
		}
		for depth := 0; i < len(v); i++ {
			switch v[i] {
			case '(':
				depth++
			case ')':
				depth = max(depth-1, 0)
			}
			if v[i] == ',' && depth == 0 {
				break
			}
		}
	}
	return out
}

func isHTMLSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'
}

// isCSS reports whether a response is a stylesheet, by its Content-Type or,
// when there is none, by its path's ".css".
func isCSS(contentType string, u *url.URL) bool {
	if strings.TrimSpace(contentType) == "" {
		return strings.HasSuffix(strings.ToLower(u.Path), ".css")
	}
	return mediaType(contentType) == "text/css"
}

// cssEmbeds returns the URLs a stylesheet loads (cssURLs), normalized
// against its own URL.
func cssEmbeds(body []byte, cssURL *url.URL, dropParams []string) []string {
	s := newURLSet(cssURL, dropParams, 16)
	cssURLs(body, s)
	return s.urls
}

// cssURLs adds to s the url() values of a stylesheet, a style element or
// a style attribute, and the targets of its @import rules, whether given
// as url() or as a string. Comments, and strings other than an @import's,
// hold no URL. Bytes that are not CSS end as tokens of no URL.
func cssURLs(b []byte, s *urlSet) {
	// The lexer writes a NUL after its input when the slice has room, and
	// b may be a window of the page: a full slice makes it copy instead.
	l := css.NewLexer(parse.NewInputBytes(b[:len(b):len(b)]))
	importing := false
	for {
		tt, data := l.Next()
		switch tt {
		case css.ErrorToken:
			return
		case css.WhitespaceToken, css.CommentToken:
			continue
		case css.AtKeywordToken:
			importing = asciiEqualFold(data, "@import")
			continue
		case css.URLToken:
			s.add(cssURLValue(data))
		case css.StringToken:
			if importing {
				s.add(cssString(data))
			}
		}
		importing = false
	}
}

// cssURLValue returns the URL of a url() token: what is between "url("
// and ")", its quotes and escapes undone.
func cssURLValue(tok []byte) string {
	open := strings.IndexByte(string(tok), '(')
	if open < 0 {
		return ""
	}
	v := strings.TrimSpace(strings.TrimSuffix(string(tok[open+1:]), ")"))
	if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
		return cssString([]byte(v))
	}
	return cssUnescape(v)
}

// cssString returns the value of a CSS string token, its quotes and
// escapes undone.
func cssString(tok []byte) string {
	v := string(tok)
	if len(v) > 0 && (v[0] == '"' || v[0] == '\'') {
		q := v[0]
		v = v[1:]
		if len(v) > 0 && v[len(v)-1] == q {
			v = v[:len(v)-1]
		}
	}
	return cssUnescape(v)
}

// cssUnescape undoes CSS escapes: a backslash and up to six hex digits
// (and one white space after them) is that code point, a backslash and a
// newline is nothing (a string's line continuation), a backslash and any
// other character is that character.
func cssUnescape(v string) string {
	if !strings.Contains(v, `\`) {
		return v
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] != '\\' || i+1 == len(v) {
			b.WriteByte(v[i])
			continue
		}
		i++
		j := i
		for j < len(v) && j-i < 6 && isHex(v[j]) {
			j++
		}
		switch {
		case j > i:
			r := hexValue(v[i:j])
			if r == 0 || r > utf8.MaxRune || (r >= 0xD800 && r <= 0xDFFF) {
				r = utf8.RuneError
			}
			b.WriteRune(r)
			if j < len(v) && isHTMLSpace(v[j]) {
				j++
			}
			i = j - 1
		case v[i] == '\n' || v[i] == '\f':
		case v[i] == '\r':
			if i+1 < len(v) && v[i+1] == '\n' {
				i++
			}
		default:
			b.WriteByte(v[i])
		}
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func hexValue(h string) rune {
	var r rune
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

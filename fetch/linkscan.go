package fetch

import "bytes"

// scanLinkTags appends to spans the start and end offsets of every start
// tag of body whose name linkTagName keeps or that may have a style
// attribute (hasStyleAttr), from its '<' to just past its '>', and of
// every style element from its start tag's '<' to just past its end
// tag's '>', in document order, and returns spans.
//
// It finds exactly the tags golang.org/x/net/html's Tokenizer (v0.59.0)
// finds, by reproducing the tokenizer's boundaries and contexts: where
// each tag, end tag, comment, doctype and bogus comment ends, and the raw
// text of script (with its escaped and double-escaped states), style,
// textarea, title, iframe, noembed, noframes, noscript, xmp and plaintext.
// It is hand-written rather than left to the library because the
// tokenizer reads every byte of a page through a function call, text,
// scripts and styles included, while this jumps to the next '<' with
// bytes.IndexByte and looks at the bytes of tags only; the library still
// parses every kept tag's attributes (linkTags hands it the spans), so
// entities, NULs and newlines in values stay its business. A tag that EOF
// cuts off ends the scan, as it ends the tokenizer's tokens. The
// differential fuzz target FuzzLinkTagsMatchReference holds linkTags, and
// so this scanner, to the plain tokenizer loop on any bytes. Each function
// below names the tokenizer function it mirrors: a change to either must
// keep them in step.
func scanLinkTags(body []byte, spans []int) []int {
	n := len(body)
	i := 0
	for {
		j := bytes.IndexByte(body[i:], '<')
		if j < 0 {
			return spans
		}
		i += j
		if i+1 >= n {
			return spans
		}
		switch c := body[i+1]; {
		case isASCIILetter(c):
			// Tokenizer.readStartTag.
			nameEnd, end := scanTag(body, i+2)
			if end < 0 {
				return spans
			}
			raw := rawTextName(body[i+1 : nameEnd])
			if raw == "style" {
				// A style element is kept with its text and its end tag,
				// so that the tokenizer reads the text as it reads it in
				// the page; a style cut off by EOF runs to EOF.
				k := rawTextEnd(body, end, raw)
				if k < 0 {
					return append(spans, i, n)
				}
				if _, closed := scanTag(body, k+3); closed >= 0 {
					spans, i = append(spans, i, closed), closed
					continue
				}
				return append(spans, i, n)
			}
			if linkTagName(body[i:end]) != "" || hasStyleAttr(body[nameEnd:end]) {
				spans = append(spans, i, end)
			}
			i = end
			switch raw {
			case "":
			case "plaintext":
				// Its text runs to EOF, whatever follows.
				return spans
			case "script":
				if i = scriptEnd(body, i); i < 0 {
					return spans
				}
			default:
				if i = rawTextEnd(body, i, raw); i < 0 {
					return spans
				}
			}
		case c == '/' || c == '?' || c == '!':
			if i = markupEnd(body, i); i < 0 {
				return spans
			}
		default:
			// '<' and any other byte is text; that byte may be a '<'.
			i++
		}
	}
}

// markupEnd returns the offset just past the end tag, comment, doctype,
// processing instruction or bogus comment whose '<' is at i and whose
// next byte is '/', '?' or '!', or -1 when EOF cuts it off
// (Tokenizer.Next's cases for them).
func markupEnd(b []byte, i int) int {
	n := len(b)
	switch b[i+1] {
	case '/':
		// Tokenizer.Next's end tag case.
		if i+2 >= n {
			return -1
		}
		switch c2 := b[i+2]; {
		case c2 == '>':
			// "</>" is no token at all.
			return i + 3
		case isASCIILetter(c2):
			// An end tag's attributes are parsed like a start tag's, so a
			// quoted '>' does not end it either.
			_, end := scanTag(b, i+3)
			return end
		}
		return closeAngleEnd(b, i+2)
	case '?':
		// A processing instruction is a bogus comment up to '>'.
		return closeAngleEnd(b, i+1)
	}
	// '!': Tokenizer.readMarkupDeclaration reads two bytes first, and EOF
	// in them ends the document.
	if i+3 >= n {
		return -1
	}
	if b[i+2] == '-' && b[i+3] == '-' {
		return commentEnd(b, i+4)
	}
	// A doctype and a bogus comment (CDATA too, which the tokenizer does
	// not allow by default) both end at the first '>' after "<!":
	// "DOCTYPE" and white space hold none.
	return closeAngleEnd(b, i+2)
}

// hasStyleAttr reports whether the bytes of a tag after its name may hold
// a style attribute: "style" in any case. It may say yes for a tag that
// has none ("<div class=stylish>"); the tokenizer then finds no style
// attribute and the tag is dropped (tagScratch.add).
func hasStyleAttr(b []byte) bool {
	for {
		k := bytes.IndexAny(b, "sS")
		if k < 0 || len(b)-k < len("style") {
			return false
		}
		if asciiEqualFold(b[k:k+len("style")], "style") {
			return true
		}
		b = b[k+1:]
	}
}

// asciiEqualFold reports whether b is s (lower case) in any ASCII case.
func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(s) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// isASCIILetter reports whether c is in [A-Za-z], the bytes after '<'
// that start a tag.
func isASCIILetter(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// isTagSpace reports whether c is one of the tokenizer's white space bytes.
func isTagSpace(c byte) bool {
	return c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f'
}

// closeAngleEnd returns the offset just past the first '>' at or after p,
// or -1 at EOF (Tokenizer.readUntilCloseAngle).
func closeAngleEnd(b []byte, p int) int {
	k := bytes.IndexByte(b[p:], '>')
	if k < 0 {
		return -1
	}
	return p + k + 1
}

// scanTag reads a start or end tag whose '<' and first name byte come
// just before p (Tokenizer.readTag and the functions it calls). It
// returns the end of the tag name and the offset just past the tag's
// '>', or end -1 when EOF cuts the tag off.
func scanTag(b []byte, p int) (nameEnd, end int) {
	n := len(b)
	// readTagName: white space ends the name and is consumed; '/' and '>'
	// end it and are read again.
	for {
		if p >= n {
			return p, -1
		}
		c := b[p]
		if isTagSpace(c) {
			nameEnd = p
			p++
			break
		}
		if c == '/' || c == '>' {
			nameEnd = p
			break
		}
		p++
	}
	p = skipTagSpace(b, p)
	for {
		if p >= n {
			return nameEnd, -1
		}
		if b[p] == '>' {
			return nameEnd, p + 1
		}
		// readTagAttrKey: a '=' as the key's first byte belongs to the key.
		start := p
	key:
		for {
			if p >= n {
				return nameEnd, -1
			}
			c := b[p]
			p++
			switch c {
			case '=':
				if p == start+1 {
					continue
				}
				p--
				break key
			case ' ', '\n', '\r', '\t', '\f', '/', '>':
				p--
				break key
			}
		}
		if p = scanAttrVal(b, p); p < 0 {
			return nameEnd, -1
		}
		p = skipTagSpace(b, p)
	}
}

// scanAttrVal reads what follows an attribute's key at p: nothing, a '/',
// or '=' and a value, quoted or not (Tokenizer.readTagAttrVal). It
// returns the offset to read next, or -1 when EOF cuts the tag off.
func scanAttrVal(b []byte, p int) int {
	n := len(b)
	if p = skipTagSpace(b, p); p >= n {
		return -1
	}
	switch b[p] {
	case '/':
		// Consumed: the self-closing solidus.
		return p + 1
	case '=':
	default:
		return p
	}
	if p = skipTagSpace(b, p+1); p >= n {
		return -1
	}
	switch q := b[p]; q {
	case '>':
		// An empty value; the '>' ends the tag.
		return p
	case '\'', '"':
		k := bytes.IndexByte(b[p+1:], q)
		if k < 0 {
			return -1
		}
		return p + 1 + k + 1
	}
	for p++; ; p++ {
		if p >= n {
			return -1
		}
		if c := b[p]; isTagSpace(c) {
			return p + 1
		} else if c == '>' {
			return p
		}
	}
}

// skipTagSpace returns the offset of the first byte at or after p that is
// not white space, or len(b) (Tokenizer.skipWhiteSpace).
func skipTagSpace(b []byte, p int) int {
	for p < len(b) && isTagSpace(b[p]) {
		p++
	}
	return p
}

// commentEnd returns the offset just past the end of a comment whose
// "<!--" ends just before p, or -1 when it runs to EOF
// (Tokenizer.readComment): "-->", "--!>", and a '>' right after "<!--"
// or "<!---" end it.
func commentEnd(b []byte, p int) int {
	n := len(b)
	dashes, beginning := 0, true
	for p < n {
		c := b[p]
		p++
		switch c {
		case '-':
			dashes++
			continue
		case '>':
			if dashes >= 2 || beginning {
				return p
			}
		case '!':
			if dashes >= 2 {
				if p >= n {
					return -1
				}
				c = b[p]
				p++
				if c == '>' {
					return p
				}
				if c == '-' {
					dashes, beginning = 1, false
					continue
				}
			}
		}
		dashes, beginning = 0, false
	}
	return -1
}

package fetch

import "bytes"

// scanLinkTags appends to spans the start and end offsets of every start
// tag of body whose name linkTagName keeps, from its '<' to just past its
// '>', in document order, and returns spans.
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
			if linkTagName(body[i:end]) != "" {
				spans = append(spans, i, end)
			}
			raw := rawTextName(body[i+1 : nameEnd])
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
		case c == '/':
			// Tokenizer.Next's end tag case.
			if i+2 >= n {
				return spans
			}
			switch c2 := body[i+2]; {
			case c2 == '>':
				// "</>" is no token at all.
				i += 3
			case isASCIILetter(c2):
				// An end tag's attributes are parsed like a start tag's,
				// so a quoted '>' does not end it either.
				_, end := scanTag(body, i+3)
				if end < 0 {
					return spans
				}
				i = end
			default:
				if i = closeAngleEnd(body, i+2); i < 0 {
					return spans
				}
			}
		case c == '?':
			// A processing instruction is a bogus comment up to '>'.
			if i = closeAngleEnd(body, i+1); i < 0 {
				return spans
			}
		case c == '!':
			// Tokenizer.readMarkupDeclaration: it reads two bytes first,
			// and EOF in them ends the document.
			if i+3 >= n {
				return spans
			}
			if body[i+2] == '-' && body[i+3] == '-' {
				if i = commentEnd(body, i+4); i < 0 {
					return spans
				}
				continue
			}
			// A doctype and a bogus comment (CDATA too, which the
			// tokenizer does not allow by default) both end at the first
			// '>' after "<!": "DOCTYPE" and white space hold none.
			if i = closeAngleEnd(body, i+2); i < 0 {
				return spans
			}
		default:
			// '<' and any other byte is text; that byte may be a '<'.
			i++
		}
	}
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
		// readTagAttrVal.
		if p = skipTagSpace(b, p); p >= n {
			return nameEnd, -1
		}
		switch b[p] {
		case '/':
			// Consumed: the self-closing solidus.
			p++
		case '=':
			if p = skipTagSpace(b, p+1); p >= n {
				return nameEnd, -1
			}
			switch q := b[p]; q {
			case '>':
				// An empty value; the '>' ends the tag.
			case '\'', '"':
				k := bytes.IndexByte(b[p+1:], q)
				if k < 0 {
					return nameEnd, -1
				}
				p += 1 + k + 1
			default:
				for p++; ; p++ {
					if p >= n {
						return nameEnd, -1
					}
					if c := b[p]; isTagSpace(c) {
						p++
						break
					} else if c == '>' {
						break
					}
				}
			}
		}
		p = skipTagSpace(b, p)
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

// rawTextName returns the lower-cased name of an element whose text the
// tokenizer reads raw after its start tag (self-closing or not), or ""
// (Tokenizer.readStartTag's startTagIn calls).
func rawTextName(name []byte) string {
	var buf [len("plaintext")]byte
	if len(name) < len("xmp") || len(name) > len(buf) {
		return ""
	}
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	switch string(buf[:len(name)]) {
	case "iframe":
		return "iframe"
	case "noembed":
		return "noembed"
	case "noframes":
		return "noframes"
	case "noscript":
		return "noscript"
	case "plaintext":
		return "plaintext"
	case "script":
		return "script"
	case "style":
		return "style"
	case "textarea":
		return "textarea"
	case "title":
		return "title"
	case "xmp":
		return "xmp"
	}
	return ""
}

// rawEndTag reads what follows a "</" at p in raw text: whether it is the
// end tag of the element named tag (lower case), which is tag's name in
// any case followed by white space, '/' or '>' (Tokenizer.readRawEndTag).
// It returns the offset of the byte to read next when it is not, and -1
// at EOF.
func rawEndTag(b []byte, p int, tag string) (ok bool, next int) {
	for i := 0; i < len(tag); i++ {
		if p >= len(b) {
			return false, -1
		}
		if c := b[p]; c != tag[i] && c != tag[i]-('a'-'A') {
			return false, p
		}
		p++
	}
	if p >= len(b) {
		return false, -1
	}
	switch b[p] {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		return true, p
	}
	return false, p
}

// rawTextEnd returns the offset of the '<' of the end tag that closes the
// raw text or RCDATA starting at p, or -1 when the text runs to EOF
// (Tokenizer.readRawOrRCDATA).
func rawTextEnd(b []byte, p int, tag string) int {
	for {
		k := bytes.IndexByte(b[p:], '<')
		if k < 0 {
			return -1
		}
		p += k
		if p+1 >= len(b) {
			return -1
		}
		if b[p+1] != '/' {
			p++
			continue
		}
		ok, next := rawEndTag(b, p+2, tag)
		if ok {
			return p
		}
		if next < 0 {
			return -1
		}
		// Neither "</" nor the name's matched bytes can be a '<'.
		p = next
	}
}

// scriptEnd returns the offset of the '<' of the "</script" that closes
// the script text starting at p, or -1 when the text runs to EOF. It is
// Tokenizer.readScript's state machine, state for state, with "reconsume"
// as p--; only the plain script data state jumps with IndexByte.
func scriptEnd(b []byte, p int) int {
	n := len(b)
	var (
		c    byte
		k    int
		ok   bool
		next int
	)

scriptData:
	k = bytes.IndexByte(b[p:], '<')
	if k < 0 {
		return -1
	}
	p += k + 1
	// scriptDataLessThanSign
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	switch c {
	case '/':
		goto scriptDataEndTagOpen
	case '!':
		goto scriptDataEscapeStart
	}
	p--
	goto scriptData

scriptDataEndTagOpen:
	if ok, next = rawEndTag(b, p, "script"); ok {
		return p - 2
	} else if next < 0 {
		return -1
	}
	p = next
	goto scriptData

scriptDataEscapeStart:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	if c == '-' {
		goto scriptDataEscapeStartDash
	}
	p--
	goto scriptData

scriptDataEscapeStartDash:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	if c == '-' {
		goto scriptDataEscapedDashDash
	}
	p--
	goto scriptData

scriptDataEscaped:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	switch c {
	case '-':
		goto scriptDataEscapedDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDash:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	}
	goto scriptDataEscaped

scriptDataEscapedDashDash:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	switch c {
	case '-':
		goto scriptDataEscapedDashDash
	case '<':
		goto scriptDataEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataEscaped

scriptDataEscapedLessThanSign:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	if c == '/' {
		goto scriptDataEscapedEndTagOpen
	}
	if isASCIILetter(c) {
		goto scriptDataDoubleEscapeStart
	}
	p--
	goto scriptData

scriptDataEscapedEndTagOpen:
	if ok, next = rawEndTag(b, p, "script"); ok {
		return p - 2
	} else if next < 0 {
		return -1
	}
	p = next
	goto scriptDataEscaped

scriptDataDoubleEscapeStart:
	// The letter is read again as the first of "script".
	p--
	if ok, next = doubleEscapeScript(b, p); next < 0 {
		return -1
	}
	p = next
	if ok {
		goto scriptDataDoubleEscaped
	}
	goto scriptDataEscaped

scriptDataDoubleEscaped:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDash:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedDashDash:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	switch c {
	case '-':
		goto scriptDataDoubleEscapedDashDash
	case '<':
		goto scriptDataDoubleEscapedLessThanSign
	case '>':
		goto scriptData
	}
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapedLessThanSign:
	if p >= n {
		return -1
	}
	c = b[p]
	p++
	if c == '/' {
		goto scriptDataDoubleEscapeEnd
	}
	p--
	goto scriptDataDoubleEscaped

scriptDataDoubleEscapeEnd:
	if ok, next = rawEndTag(b, p, "script"); ok {
		// "</script" and the byte after it are consumed, and the
		// script is escaped again rather than over.
		p = next + 1
		goto scriptDataEscaped
	} else if next < 0 {
		return -1
	}
	p = next
	goto scriptDataDoubleEscaped
}

// doubleEscapeScript reads "script" in any case followed by white space,
// '/' or '>' at p, inside an escaped script (the tokenizer's
// scriptDataDoubleEscapeStart). It reports whether that is what it found
// and the offset to read next: past the byte after the name if so, the
// first byte that did not match if not; -1 at EOF.
func doubleEscapeScript(b []byte, p int) (ok bool, next int) {
	const lower, upper = "script", "SCRIPT"
	for i := 0; i < len(lower); i++ {
		if p >= len(b) {
			return false, -1
		}
		if c := b[p]; c != lower[i] && c != upper[i] {
			return false, p
		}
		p++
	}
	if p >= len(b) {
		return false, -1
	}
	switch b[p] {
	case ' ', '\n', '\r', '\t', '\f', '/', '>':
		return true, p + 1
	}
	return false, p
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

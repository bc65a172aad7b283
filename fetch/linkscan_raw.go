package fetch

import "bytes"

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
// Tokenizer.readScript's state machine, state for state, one step
// function per group of states, with "reconsume" as p--; only the plain
// script data state jumps with IndexByte.
func scriptEnd(b []byte, p int) int {
	st := scriptData
	for {
		switch st {
		case scriptEOF:
			return -1
		case scriptClosed:
			return p
		case scriptData:
			st, p = scriptDataStep(b, p)
		case scriptEscapedLessThan:
			st, p = scriptEscapedLessThanStep(b, p)
		case scriptDoubleEscapedLessThan:
			st, p = scriptDoubleEscapedLessThanStep(b, p)
		default:
			st, p = scriptEscapedStep(b, p, st)
		}
	}
}

// scriptState is a state of Tokenizer.readScript, named as its labels
// are, plus the two ends of the machine. The escaped and double-escaped
// states are laid out alike (escaped, dash, dash dash, less-than sign),
// so that one step function serves both.
type scriptState uint8

const (
	scriptData scriptState = iota
	scriptEscaped
	scriptEscapedDash
	scriptEscapedDashDash
	scriptEscapedLessThan
	scriptDoubleEscaped
	scriptDoubleEscapedDash
	scriptDoubleEscapedDashDash
	scriptDoubleEscapedLessThan
	// scriptClosed: p is the '<' of the closing "</script".
	scriptClosed
	// scriptEOF: the script text runs to EOF.
	scriptEOF
)

// scriptDataStep runs the states scriptData, scriptDataLessThanSign,
// scriptDataEndTagOpen, scriptDataEscapeStart and
// scriptDataEscapeStartDash from p.
func scriptDataStep(b []byte, p int) (scriptState, int) {
	k := bytes.IndexByte(b[p:], '<')
	if k < 0 {
		return scriptEOF, p
	}
	p += k + 1
	if p >= len(b) {
		return scriptEOF, p
	}
	switch b[p] {
	case '/':
		return scriptEndTagStep(b, p, scriptData)
	case '!':
		// scriptDataEscapeStart and its dash: "<!--" escapes the script;
		// anything else is read again as script data.
		if p+1 >= len(b) || p+2 >= len(b) && b[p+1] == '-' {
			return scriptEOF, p
		}
		if b[p+1] == '-' && b[p+2] == '-' {
			return scriptEscapedDashDash, p + 3
		}
		if b[p+1] == '-' {
			return scriptData, p + 2
		}
		return scriptData, p + 1
	}
	return scriptData, p
}

// scriptEndTagStep reads what follows a "</" in script text, p at its
// '/' (scriptDataEndTagOpen, scriptDataEscapedEndTagOpen): the closing
// "</script", or else the state otherwise from the first byte that did
// not match.
func scriptEndTagStep(b []byte, p int, otherwise scriptState) (scriptState, int) {
	ok, next := rawEndTag(b, p+1, "script")
	switch {
	case ok:
		return scriptClosed, p - 1
	case next < 0:
		return scriptEOF, p
	}
	return otherwise, next
}

// scriptEscapedStep reads one byte in an escaped state, or in a double
// escaped one: the two are laid out alike from base.
func scriptEscapedStep(b []byte, p int, st scriptState) (scriptState, int) {
	base := scriptEscaped
	if st >= scriptDoubleEscaped {
		base = scriptDoubleEscaped
	}
	if p >= len(b) {
		return scriptEOF, p
	}
	c := b[p]
	p++
	switch {
	case c == '-' && st == base:
		return base + 1, p // dash
	case c == '-':
		return base + 2, p // dash dash
	case c == '<':
		return base + 3, p // less-than sign
	case c == '>' && st == base+2:
		return scriptData, p
	}
	return base, p
}

// scriptEscapedLessThanStep runs scriptDataEscapedLessThanSign and the
// states it leads to: the escaped end tag, or "script" starting the
// double escape.
func scriptEscapedLessThanStep(b []byte, p int) (scriptState, int) {
	if p >= len(b) {
		return scriptEOF, p
	}
	c := b[p]
	switch {
	case c == '/':
		return scriptEndTagStep(b, p, scriptEscaped)
	case isASCIILetter(c):
		// scriptDataDoubleEscapeStart: the letter is read again as the
		// first of "script".
		ok, next := doubleEscapeScript(b, p)
		switch {
		case next < 0:
			return scriptEOF, p
		case ok:
			return scriptDoubleEscaped, next
		}
		return scriptEscaped, next
	}
	// The tokenizer goes back to plain script data here, not to the
	// escaped state.
	return scriptData, p
}

// scriptDoubleEscapedLessThanStep runs
// scriptDataDoubleEscapedLessThanSign and scriptDataDoubleEscapeEnd:
// "</script" and the byte after it end the double escape.
func scriptDoubleEscapedLessThanStep(b []byte, p int) (scriptState, int) {
	if p >= len(b) {
		return scriptEOF, p
	}
	if b[p] != '/' {
		return scriptDoubleEscaped, p
	}
	ok, next := rawEndTag(b, p+1, "script")
	switch {
	case ok:
		// "</script" and the byte after it are consumed, and the script
		// is escaped again rather than over.
		return scriptEscaped, next + 1
	case next < 0:
		return scriptEOF, p
	}
	return scriptDoubleEscaped, next
}

// doubleEscapeScript reads "script" in any case followed by white space,
// '/' or '>' at p, inside an escaped script (the tokenizer's
// scriptDataDoubleEscapeStart). It reports whether that is what it found
// and the offset to read next: past the byte after the name if so, the
// first byte that did not match if not; -1 at EOF.
func doubleEscapeScript(b []byte, p int) (ok bool, next int) {
	// The same bytes as a raw end tag's after its "</", with the byte
	// after the name consumed.
	if ok, next = rawEndTag(b, p, "script"); ok {
		return true, next + 1
	}
	return false, next
}

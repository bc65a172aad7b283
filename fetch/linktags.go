package fetch

import (
	"bytes"
	"slices"
	"sync"

	"golang.org/x/net/html"
)

// tag is a start tag that link extraction reads.
type tag struct {
	name  string
	attrs []html.Attribute
	// first and last are the tag's span indices while linkTags reads.
	first, last int
}

// attr returns the value of the tag's first attribute named key.
func (t tag) attr(key string) (string, bool) {
	for _, a := range t.attrs {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

func (t tag) attrOr(key string) string {
	v, _ := t.attr(key)
	return v
}

// linkTags returns the base, meta, a, area, frame, iframe and link tags of
// a document, in document order, with the attributes link extraction reads
// (linkAttrName).
//
// It finds the tags golang.org/x/net/html's tokenizer finds rather than
// building goquery's tree: the tokenizer skips comments and the
// text of script, style, textarea, title, noscript and the other raw-text
// elements as the parser does, so it finds the same tags (the differential
// test TestLinkTagsAgreeWithGoquery holds it to goquery on the test web and
// on hostile pages), has no nesting limit (the parser gives up past 512
// elements), and costs a fraction: BenchmarkLinkTags measured 3-4x less
// time and a tenth of the allocations per 8 KB page than the tree
// (bench/README.md). A page's tree is never needed for links: the links
// are the tags, whatever their parents.
//
// The tokenizer itself reads every byte of the page through a function
// call, and most of a real page is text, script and style; so
// scanLinkTags finds the kept tags' bytes first, with the tokenizer's
// rules, and only those go through a tokenizer, which parses their
// attributes as it would have in the page. The values of all kept
// attributes are gathered in one pooled buffer and become one string, so
// a page costs a few allocations of ours rather than one per attribute.
func linkTags(body []byte) []tag {
	sc := scratchPool.Get().(*tagScratch)
	defer sc.release()
	sc.at = scanLinkTags(body, sc.at)
	if len(sc.at) == 0 {
		return nil
	}
	for k := 0; k < len(sc.at); k += 2 {
		sc.raw = append(sc.raw, body[sc.at[k]:sc.at[k+1]]...)
	}
	sc.rd.Reset(sc.raw)
	z := html.NewTokenizer(&sc.rd)
	for {
		switch z.Next() {
		case html.ErrorToken:
			// io.EOF: the tokenizer never fails otherwise on a reader of bytes.
			return sc.finish()
		case html.StartTagToken, html.SelfClosingTagToken:
			// After an iframe's start tag the tokenizer would read what
			// follows as the iframe's raw text; here that is the next
			// kept tag, whose place in the page scanLinkTags already
			// judged. A style element's span holds its text.
			if !sc.add(z) {
				z.NextIsNotRawText()
			}
		case html.TextToken:
			sc.addText(z)
		}
	}
}

// tagScratch gathers a page's tags and their kept attributes: the values
// in vals, their keys and places in spans. While linkTags reads, at holds
// the kept tags' offsets in the page, raw their bytes, and rd reads raw.
type tagScratch struct {
	tags  []tag
	vals  []byte
	spans []attrSpan
	at    []int
	raw   []byte
	rd    bytes.Reader
}

// attrSpan is a kept attribute: its key, and where its value is in vals.
type attrSpan struct {
	key        string
	start, end int
}

var scratchPool = sync.Pool{New: func() any { return new(tagScratch) }}

// add appends the tokenizer's current start tag, with its kept
// attributes, if linkTagName keeps it or it has a style attribute (of
// another tag, only that one is kept); it reports whether the tag is a
// style element, whose text comes next. The tokenizer's TagName copies
// the name of every tag; add reads it from Raw instead and calls TagAttr
// only on the tags it keeps.
func (sc *tagScratch) add(z *html.Tokenizer) (style bool) {
	tn := linkTagName(z.Raw())
	t := tag{name: tn}
	first := len(sc.spans)
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		if an := linkAttrName(k); an != "" && (tn != "" || an == "style") {
			sc.spans = append(sc.spans, attrSpan{key: an, start: len(sc.vals), end: len(sc.vals) + len(v)})
			sc.vals = append(sc.vals, v...)
		}
	}
	if tn == "" && len(sc.spans) == first {
		// "style" was in the tag, but not as an attribute.
		return false
	}
	t.first, t.last = first, len(sc.spans)
	sc.tags = append(sc.tags, t)
	return tn == "style"
}

// addText keeps a style element's text, as its attribute cssText.
func (sc *tagScratch) addText(z *html.Tokenizer) {
	n := len(sc.tags)
	if n == 0 || sc.tags[n-1].name != "style" || sc.tags[n-1].last != len(sc.spans) {
		return
	}
	v := z.Text()
	sc.spans = append(sc.spans, attrSpan{key: cssText, start: len(sc.vals), end: len(sc.vals) + len(v)})
	sc.vals = append(sc.vals, v...)
	sc.tags[n-1].last = len(sc.spans)
}

// cssText is the key under which a style element's tag holds its text.
const cssText = "#text"

// finish returns a copy of the tags, each with its attributes, whose
// values share one string.
func (sc *tagScratch) finish() []tag {
	if len(sc.tags) == 0 {
		return nil
	}
	tags := slices.Clone(sc.tags)
	if len(sc.spans) == 0 {
		return tags
	}
	vals := string(sc.vals)
	attrs := make([]html.Attribute, len(sc.spans))
	for i, sp := range sc.spans {
		attrs[i] = html.Attribute{Key: sp.key, Val: vals[sp.start:sp.end]}
	}
	for i := range tags {
		t := &tags[i]
		if t.first < t.last {
			t.attrs = attrs[t.first:t.last:t.last]
		}
	}
	return tags
}

// release returns sc to the pool, unless a huge page made it huge.
func (sc *tagScratch) release() {
	if cap(sc.vals) > 64<<10 || cap(sc.spans) > 4096 || cap(sc.tags) > 4096 || cap(sc.at) > 8192 || cap(sc.raw) > 256<<10 {
		return
	}
	clear(sc.tags) // drops the attributes' references
	sc.tags, sc.vals, sc.spans = sc.tags[:0], sc.vals[:0], sc.spans[:0]
	sc.at, sc.raw = sc.at[:0], sc.raw[:0]
	scratchPool.Put(sc)
}

// linkTagName returns the interned name of a tag link extraction reads, or
// "" (no allocation either way), from the raw bytes of a start tag token.
// The name is what the tokenizer's TagName returns: the bytes after '<' up
// to white space, '/' or '>', ASCII lower-cased (a NUL in it, which
// TagName replaces, makes it none of these names).
func linkTagName(raw []byte) string {
	var buf [len("iframe")]byte
	n := 0
	for _, c := range raw[min(1, len(raw)):] {
		if c == ' ' || c == '\n' || c == '\r' || c == '\t' || c == '\f' || c == '/' || c == '>' {
			break
		}
		if n == len(buf) {
			return ""
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	switch string(buf[:n]) {
	case "a":
		return "a"
	case "area":
		return "area"
	case "base":
		return "base"
	case "meta":
		return "meta"
	case "link":
		return "link"
	case "frame":
		return "frame"
	case "iframe":
		return "iframe"
	case "img":
		return "img"
	case "source":
		return "source"
	case "script":
		return "script"
	case "style":
		return "style"
	case "video":
		return "video"
	case "audio":
		return "audio"
	case "track":
		return "track"
	case "embed":
		return "embed"
	case "object":
		return "object"
	}
	return ""
}

// linkAttrName returns the interned name of an attribute link extraction
// reads, or "".
func linkAttrName(b []byte) string {
	switch string(b) {
	case "href":
		return "href"
	case "src":
		return "src"
	case "rel":
		return "rel"
	case "name":
		return "name"
	case "content":
		return "content"
	case "http-equiv":
		return "http-equiv"
	case "srcset":
		return "srcset"
	case "data":
		return "data"
	case "poster":
		return "poster"
	case "style":
		return "style"
	}
	return ""
}

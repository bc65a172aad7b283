package fetch

import (
	"bytes"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
)

// refLinkTags is linkTags as it was before its allocations were cut:
// the tag name from the tokenizer's TagName, one string per attribute,
// the whole page through the tokenizer. FuzzLinkTagsMatchReference holds
// linkTags to it.
func refLinkTags(body []byte) []tag {
	var tags []tag
	// styleOpen: the last token was a style element's start tag.
	styleOpen := false
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			return tags
		case html.TextToken:
			if styleOpen {
				t := &tags[len(tags)-1]
				t.attrs = append(t.attrs, html.Attribute{Key: cssText, Val: string(z.Text())})
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			if t, ok := refTag(z); ok {
				tags = append(tags, t)
				styleOpen = t.name == "style"
				continue
			}
		}
		styleOpen = false
	}
}

// refTag reads the tokenizer's start tag as linkTags keeps it: a tag
// named in refTagNames with the attributes linkAttrName reads, or any
// other tag with a style attribute, with only that attribute.
func refTag(z *html.Tokenizer) (tag, bool) {
	name, hasAttr := z.TagName()
	tn := ""
	if slices.Contains(refTagNames, string(name)) {
		tn = string(name)
	}
	t := tag{name: tn}
	for hasAttr {
		var k, v []byte
		k, v, hasAttr = z.TagAttr()
		if an := linkAttrName(k); an != "" && (tn != "" || an == "style") {
			t.attrs = append(t.attrs, html.Attribute{Key: an, Val: string(v)})
		}
	}
	return t, tn != "" || len(t.attrs) > 0
}

// refTagNames are the tags link and embed extraction read.
var refTagNames = []string{"a", "area", "base", "meta", "link", "frame", "iframe",
	"img", "source", "script", "style", "video", "audio", "track", "embed", "object"}

// FuzzLinkTagsMatchReference holds linkTags to refLinkTags on any bytes:
// the same tags, with the same attributes in the same order. Each input is
// also read as a list of markup fragments (fragmentDoc), because random
// bytes rarely spell "--!>" or "</textarea" where it matters, and the
// fragments do in a few seconds.
func FuzzLinkTagsMatchReference(f *testing.F) {
	f.Add([]byte(benchPage()))
	for _, d := range linkDocs {
		f.Add([]byte(d))
	}
	for _, d := range []string{"<A\x00 href=x>", "<iFrAmE\tsrc=/f>", "<a/href=/x>", "<a", "<link", "<a href=\"/x\"", "<metax name=robots>", "<a\fhref=/y>"} {
		f.Add([]byte(d))
	}
	for _, d := range scanSeeds {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, body := range [][]byte{data, fragmentDoc(data)} {
			got, want := linkTags(body), refLinkTags(body)
			if !slices.EqualFunc(got, want, func(a, b tag) bool { return a.name == b.name && slices.Equal(a.attrs, b.attrs) }) {
				require.FailNow(t, fmt.Sprintf("linkTags(%q)\n = %v\nreference %v", body, describe(got), describe(want)))
			}
		}
	})
}

// fragments are the pieces of markup whose bounds scanLinkTags must get
// right, 64 of them.
var fragments = [64]string{
	"<", ">", "/", "!", "-", "?", "=", "'", "\"", " ", "\n", "\x00", "a", "S", "[", "]",
	"<a href=/l>", "<A HREF='/m>'>", "<a href=\"/n\"", "<iframe src=/f>", "</iframe>", "<meta name=robots content=x>",
	"<!--", "-->", "--!>", "<!-->", "<!--->", "<!", "<!DOCTYPE html>", "<![CDATA[", "]]>", "<?", "</", "</>", "</a>", "</a '>'>",
	"<script>", "</script>", "<SCRIPT>", "</SCRIPT", "<script/>", "<script", "script", "SCRIPT",
	"<style>", "</style>", "<textarea>", "</textarea>", "<title>", "</title", "<xmp>", "</xmp>",
	"<noembed>", "</noembed>", "<noframes>", "</noframes>", "<noscript>", "</noscript>", "<plaintext>",
	"<b>", "</b>", "<a\x00 href=/z>", "<a href=/o", "\t",
}

// fragmentDoc reads each of the first 512 bytes of data as a fragment (its
// low six bits), followed by a link tag when its next bit is set, and ends
// the document with a link tag: a scanner that misjudges where a construct
// ends then misses or invents a tag without the fuzzer having to spell
// one.
func fragmentDoc(data []byte) []byte {
	var b []byte
	for _, c := range data[:min(len(data), 512)] {
		b = append(b, fragments[c&63]...)
		if c&64 != 0 {
			b = append(b, "<a href=/k>"...)
		}
	}
	return append(b, "<a href=/end>"...)
}

// tokenizerLinkTags is linkTags as it was before scanLinkTags: the whole
// page through the tokenizer. The benchmarks compare the two.
func tokenizerLinkTags(body []byte) []tag {
	sc := scratchPool.Get().(*tagScratch)
	defer sc.release()
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return sc.finish()
		case html.StartTagToken, html.SelfClosingTagToken:
			sc.add(z)
		}
	}
}

// scanSeeds are the constructs whose bounds scanLinkTags reproduces from
// the tokenizer, each with a link tag after it (or inside it) that the
// scanner must keep or skip as the tokenizer does.
var scanSeeds = []string{
	// Comments and each way one ends, or does not.
	`<!-- x --><a href=/1>`, `<!-- x --!><a href=/2>`, `<!--><a href=/3>`, `<!---><a href=/4>`,
	`<!----><a href=/5>`, `<!-- x -- ><a href=/6> --><a href=/7>`, `<!-- x --!-><a href=/8>--><a href=/9>`,
	`<!-- x --!x><a href=/10>--><a href=/11>`, `<!-- x ---!><a href=/12>`, `<!-- x -!><a href=/13>-->`,
	`<!-- <a href=/in>`, `<!--`, `<!--x--`, `<!--x--!`, `<!-`, `<!`, `<!>`, `<!><a href=/14>`,
	// Doctype, bogus comments, CDATA, processing instructions, "</".
	`<!DOCTYPE html><a href=/15>`, `<!doctype html PUBLIC "x>y"><a href=/16>`, `<!DOCTYP`, `<!DOCTYPE`,
	`<![CDATA[<a href=/in>]]><a href=/17>`, `<![CDATA[ x ]]>`, `<?xml version="1.0"?><a href=/18>`, `<?x <a href=/19>`,
	`</><a href=/20>`, `</ a href=/21><a href=/22>`, `</1><a href=/23>`, `</a href=">"><a href=/24>`, `</`, `</a`, `</a href="x`,
	`<<a href=/25>`, `< a href=/26><a href=/27>`, `<1a><a href=/28>`, `<a href=/29><`, `<a href=/30>text<`,
	// Quoted and unquoted values and their '>'.
	`<a href=">" title='>'><a href=/31>`, `<a title=x>y href=/32>`, `<a b"c>"<a href=/33>`, `<a ='x>'<a href=/34>`,
	`<a b/="x>"<a href=/35>`, `<a b = "x>" href=/36>`, `<a b= >`, `<a b=>c href=/37>`, `<a/b="x>"/href=/38>`,
	`<a href="/x>`, `<a href='/y`, `<a href=/z`, `<a href`, `<a href=`, `<a `, "<a\n\thref\f=\r/w\r\n>",
	// Names: case, NULs, other bytes.
	`<A HREF=/39>`, `<IFRAME SRC=/40></IFRAME><a href=/41>`, "<a\x00 href=/42>", "<iframe\x00 src=/43><a href=/44>",
	"<script\x00><a href=/45>", "<\x00a href=/46>", "<aa href=/47><a\xc3\xa9 href=/48><a\x80 href=/49>",
	// Raw text and RCDATA elements in mixed case, and how they end.
	`<ScRiPt><a href=/in></sCrIpT><a href=/50>`, `<STYLE><a href=/in></style ><a href=/51>`,
	`<textarea><a href=/in></TEXTAREA/><a href=/52>`, `<Title><a href=/in></title\n><a href=/53>`,
	`<xmp><a href=/in></xmp><a href=/54>`, `<noembed><a href=/in></noembed><a href=/55>`,
	`<NoFrames><a href=/in></noframes><a href=/56>`, `<noscript><a href=/in></noscript><a href=/57>`,
	`<iframe src=/58><a href=/in></iframe><a href=/59>`, `<plaintext><a href=/in></plaintext><a href=/in>`,
	`<title><a href=/in></titlex><a href=/in></title><a href=/60>`, `<style></styl><a href=/in></</style><a href=/61>`,
	`<script/><a href=/in></script><a href=/62>`, `<textarea/><a href=/in></textarea><a href=/63>`,
	`<script src=x /><a href=/in>`, `<title>`, `<title></title`, `<style></st`, `<script></script`, `<script><`,
	`<scripts><a href=/64>`, `<titles><a href=/65>`, `<xmp2><a href=/66>`,
	// Script escape states: "<!--" and "<script" inside a script.
	`<script><!-- <a href=/in> --></script><a href=/67>`,
	`<script><!-- <script> </script> <a href=/in> --></script><a href=/68>`,
	`<script><!-- <script> --> </script><a href=/in></script><a href=/69>`,
	`<script><!--<script></script></script><a href=/70>`, `<script><!-- </script><a href=/71>`,
	`<script><!--> </script><a href=/72>`, `<script><!---> </script><a href=/73>`, `<script><!- </script><a href=/74>`,
	`<script><!-- <SCRIPT/> - -- <a href=/in> --> </script><a href=/75>`, `<script><!-- <scriptx> </script><a href=/76>`,
	`<script><!-- <scrip </script><a href=/77>`, `<script><!-- <b </script><a href=/78>`, `<script><!-- <script`,
	`<script><!-- <script>-<</script><a href=/in>--></script><a href=/79>`, `<script><!-- -<-<</script><a href=/80>`,
	`<script><!-- <script> <!-- </script> --> </script><a href=/81>`, `<script><!-- <! <script> </script><a href=/83>`,
	`<script><!-- <1 <script> </script><a href=/84>`, `<script><!--<script>--<</ script></script><a href=/82>`,
	// Attributes with entities, NULs and newlines, and duplicates.
	`<a href="/a&amp;b&lt;c&#x41;&#66;&eacute&notit;">`, "<a href=\"/a\x00b\" rel=\"x\r\ny\rz\">", `<a HREF=/1 href=/2 Href=/3>`,
	`<meta http-equiv=refresh content="0;url=/r&amp;s"><base href=/b/><link rel=canonical href=/c><area href=/d><frame src=/e>`,
}

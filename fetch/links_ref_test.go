package fetch

import (
	"bytes"
	"slices"
	"testing"

	"golang.org/x/net/html"
)

// refLinkTags is linkTags as it was before issue 15 cut its allocations:
// the tag name from the tokenizer's TagName, one string per attribute.
// FuzzLinkTagsMatchReference holds linkTags to it.
func refLinkTags(body []byte) []tag {
	var tags []tag
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return tags
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			var tn string
			switch string(name) {
			case "a", "area", "base", "meta", "link", "frame", "iframe":
				tn = string(name)
			default:
				continue
			}
			t := tag{name: tn}
			for hasAttr {
				var k, v []byte
				k, v, hasAttr = z.TagAttr()
				if an := linkAttrName(k); an != "" {
					t.attrs = append(t.attrs, html.Attribute{Key: an, Val: string(v)})
				}
			}
			tags = append(tags, t)
		}
	}
}

// FuzzLinkTagsMatchReference holds linkTags to refLinkTags on any bytes:
// the same tags, with the same attributes in the same order.
func FuzzLinkTagsMatchReference(f *testing.F) {
	f.Add([]byte(benchPage()))
	for _, d := range linkDocs {
		f.Add([]byte(d))
	}
	for _, d := range []string{"<A\x00 href=x>", "<iFrAmE\tsrc=/f>", "<a/href=/x>", "<a", "<link", "<a href=\"/x\"", "<metax name=robots>", "<a\fhref=/y>"} {
		f.Add([]byte(d))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, want := linkTags(body), refLinkTags(body)
		if !slices.EqualFunc(got, want, func(a, b tag) bool { return a.name == b.name && slices.Equal(a.attrs, b.attrs) }) {
			t.Fatalf("linkTags(%q)\n = %v\nreference %v", body, describe(got), describe(want))
		}
	})
}

package urlrule

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestLinkDepth(t *testing.T) {
	cases := []struct {
		name   string
		link   Link
		parent int
		want   int
	}{
		{"a link in a page goes one deeper", Link{URL: "http://a.example/x"}, 2, 3},
		{"a link in a seed", Link{URL: "http://a.example/x"}, 0, 1},
		{"a sitemap named by robots.txt (parent depth -1) is a seed", Link{URL: "http://a.example/sitemap.xml"}, -1, 0},
		{"a redirect's target keeps its page's depth", Link{URL: "http://a.example/y", Hops: 1}, 2, 2},
		{"so does a chain of redirects", Link{URL: "http://a.example/z", Hops: 4}, 0, 0},
		{"an embed is at its page's depth", Link{URL: "http://a.example/i.png", Embeds: 1}, 2, 2},
		{"so is an embed of an embed", Link{URL: "http://cdn.example/f.woff", Embeds: 2}, 3, 3},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, c.link.Depth(c.parent), c.name)
	}
}

func TestHopPath(t *testing.T) {
	long := strings.Repeat("L", MaxHopPath)
	cases := []struct {
		name   string
		link   Link
		parent string
		want   string
	}{
		{"a seed's link", Link{URL: "u"}, "", "L"},
		{"an embed", Link{URL: "u", Embeds: 1}, "LL", "LLE"},
		{"a redirect's target", Link{URL: "u", Hops: 1}, "L", "LR"},
		{"an embed's redirect is a redirect", Link{URL: "u", Hops: 1, Embeds: 1}, "LE", "LER"},
		{"a path at the limit drops its first letter", Link{URL: "u", Embeds: 1}, long, "1+" + long[1:] + "E"},
		{"a cut path counts on", Link{URL: "u"}, "7+" + long, "8+" + long},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equalf(t, c.want, c.link.HopPath(c.parent), "HopPath(%q)", c.parent)
		})
	}
}

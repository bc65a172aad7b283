package urlrule

import (
	"strconv"
	"strings"
	"time"
)

// Link is a URL a fetch discovered: normalized, in scope (or an embed
// within the campaign's embed hops), not nofollow; a link found in a page,
// or a redirect's target (Hops > 0). The fetcher reports it to the
// scheduler as is, in session.Outcome.Links.
type Link struct {
	URL string `json:"url"`
	// Hops is > 0 for a redirect's target: the redirect hops so far.
	Hops int `json:"hops,omitempty"`
	// Embeds is > 0 for an embed (a page's image, stylesheet, script, ...:
	// what the page needs to render, rather than a page it links to): the
	// embeds in a row that led here, 1 for a page's own asset, 2 for an
	// asset of that asset (a stylesheet's image). A redirect's target keeps
	// its source's count.
	Embeds int `json:"embeds,omitempty"`
	// Score is the link's score for the "score" priority policy, set by
	// the fetcher's link scorer; 0 when none is set.
	Score float64 `json:"score,omitempty"`
	// LastMod is a sitemap's <lastmod> for the URL (zero when it gives
	// none): a continuous campaign fetches a URL it knows again soon when
	// this is after its last fetch.
	LastMod time.Time `json:"lastmod,omitzero"`
}

// Depth is the crawl depth of the link's page, found on a page of depth
// parent: one deeper for a link in a page, the same for a redirect's
// target and for an embed, because neither takes the crawl one link
// deeper (a page at the depth limit still gets its images). Every depth
// the crawl gives a discovered URL comes from here.
func (l Link) Depth(parent int) int {
	if l.Hops > 0 || l.Embeds > 0 {
		return parent
	}
	return parent + 1
}

// Hop letters of a hop path (Heritrix's): each says how a URL was reached
// from the one before it.
const (
	HopLink     = 'L' // a link in a page
	HopEmbed    = 'E' // a page's asset (Link.Embeds > 0)
	HopRedirect = 'R' // a redirect's target (Link.Hops > 0)
	// HopPrerequisite is the hop path of a host's robots.txt, fetched
	// before any of its pages.
	HopPrerequisite = "P"
)

// MaxHopPath is the most hop letters a path keeps: a longer one keeps its
// last MaxHopPath letters after the count of those left out and "+"
// (Heritrix's form), so a frontier message stays small however deep the
// crawl goes.
const MaxHopPath = 50

// HopPath is the hop path of the link's URL, found on a page whose hop
// path is parent: parent and one letter (R for a redirect's target, E for
// an embed, L for a link). A seed's path is empty.
func (l Link) HopPath(parent string) string {
	letter := byte(HopLink)
	switch {
	case l.Hops > 0:
		letter = HopRedirect
	case l.Embeds > 0:
		letter = HopEmbed
	}
	hidden, path := 0, parent
	if n, rest, ok := strings.Cut(parent, "+"); ok {
		if v, err := strconv.Atoi(n); err == nil && v > 0 {
			hidden, path = v, rest
		}
	}
	path += string(letter)
	if len(path) > MaxHopPath {
		hidden += len(path) - MaxHopPath
		path = path[len(path)-MaxHopPath:]
	}
	if hidden == 0 {
		return path
	}
	return strconv.Itoa(hidden) + "+" + path
}

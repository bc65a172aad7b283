package urlrule

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

package urlrule

// Link is a URL a fetch discovered: normalized, in scope, not nofollow; a
// link found in a page, or a redirect's target (Hops > 0). The fetcher
// reports it to the scheduler as is, in session.Outcome.Links.
type Link struct {
	URL string `json:"url"`
	// Hops is > 0 for a redirect's target: the redirect hops so far.
	Hops int `json:"hops,omitempty"`
	// Score is the link's score for the "score" priority policy, set by
	// the fetcher's link scorer; 0 when none is set.
	Score float64 `json:"score,omitempty"`
}

// Depth is the crawl depth of the link's page, found on a page of depth
// parent: one deeper for a link in a page, the same for a redirect's
// target, because a redirect does not take the crawl one link deeper.
// Every depth the crawl gives a discovered URL comes from here.
func (l Link) Depth(parent int) int {
	if l.Hops > 0 {
		return parent
	}
	return parent + 1
}

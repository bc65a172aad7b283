package session

import (
	"context"
	"errors"
	"slices"

	"github.com/drover-crawl/drover/campaign"
)

// OpURLs lists the URLs of one host of a campaign in one state
// (Request.List), a page at a time: `starter urls`.
const OpURLs = "urls"

// The states OpURLs lists: what a scheduler holds in memory (parked: the
// park messages its park mover holds, the first due of each park queue),
// its failure records, and the URLs it queued (its seen store's URL
// index). Done URLs are not listable from the schedulers: their marks
// keep a URL's 128-bit hash, and the index holds the URLs a scheduler
// queued, not those it recorded.
var ListableStates = []string{URLQueued, URLLeased, URLHeld, URLParked, URLFailed}

// MaxURLsPage bounds URLQuery.Limit.
const MaxURLsPage = 1000

// URLQuery asks for the URLs of Host (a host name as URLs have it, any
// case) in State, in URL order, after After (a cursor: the last URL of
// the previous page; "" for the first), at most Limit.
type URLQuery struct {
	Host  string `json:"host"`
	State string `json:"state"`
	After string `json:"after,omitempty"`
	Limit int    `json:"limit"`
	// Among, when set, asks instead which of these URLs (at most
	// MaxURLsPage) the scheduler holds past queued: leased, held, parked,
	// done or failed. A URL one scheduler queued (a link its page had) is
	// leased and recorded by the scheduler of its shard, so Client.URLs
	// asks every scheduler this of the queued URLs it lists.
	Among []string `json:"among,omitempty"`
}

// URLPage is one page of URLs, in URL order. Next is the cursor of the
// next page (its After); "" when this page is the last.
type URLPage struct {
	URLs []string `json:"urls"`
	Next string   `json:"next,omitempty"`
}

// Cut returns the page of sorted (in URL order, no duplicates) after
// q.After, at most q.Limit URLs.
func (q URLQuery) Cut(sorted []string) URLPage {
	i, found := slices.BinarySearch(sorted, q.After)
	if found {
		i++
	}
	rest := sorted[i:]
	if q.After == "" {
		rest = sorted
	}
	if len(rest) <= q.Limit {
		return URLPage{URLs: slices.Clone(rest)}
	}
	page := slices.Clone(rest[:q.Limit])
	return URLPage{URLs: page, Next: page[len(page)-1]}
}

// URLs asks this scheduler for a page of URLs of the campaign whose
// frontier key is key.
func (c *Control) URLs(ctx context.Context, key string, q URLQuery) (URLPage, error) {
	rep, err := c.do(ctx, Request{Op: OpURLs, Campaign: &campaign.Config{ID: key}, List: &q})
	if err != nil {
		return URLPage{}, err
	}
	if rep.Page == nil {
		return URLPage{}, errors.New("the scheduler answered no list (an older version?)")
	}
	return *rep.Page, nil
}

// URLs asks every scheduler for a page and merges them into one page of
// at most q.Limit URLs in URL order, its Next set when any scheduler has
// more; with every error (a scheduler that did not answer leaves its URLs
// out, and the error says so).
func (cl Client) URLs(ctx context.Context, addrs []string, key string, q URLQuery) (URLPage, error) {
	pages := make([]URLPage, len(addrs))
	errs := cl.eachScheduler(ctx, addrs, func(i int, c *Control) (err error) {
		pages[i], err = c.URLs(ctx, key, q)
		return err
	})
	page := mergePages(pages, errs, q.Limit)
	if q.State != URLQueued || len(addrs) < 2 || len(page.URLs) == 0 {
		return page, errors.Join(errs...)
	}
	// Past queued anywhere is not queued: the scheduler that queued a URL
	// keeps its mark, while the one of its shard leases and records it.
	past := make([]URLPage, len(addrs))
	errs2 := cl.eachScheduler(ctx, addrs, func(i int, c *Control) (err error) {
		past[i], err = c.URLs(ctx, key, URLQuery{Host: q.Host, State: q.State, Limit: MaxURLsPage, Among: page.URLs})
		return err
	})
	var drop []string
	for _, p := range past {
		drop = append(drop, p.URLs...)
	}
	page.URLs = slices.DeleteFunc(page.URLs, func(u string) bool { return slices.Contains(drop, u) })
	return page, errors.Join(append(errs, errs2...)...)
}

// mergePages merges the pages of the schedulers that answered (errs[i]
// nil) into one of at most limit URLs.
func mergePages(pages []URLPage, errs []error, limit int) URLPage {
	// A scheduler with more than its page has sent every URL of its own up
	// to its page's last: the merged page is certain up to the smallest
	// such last URL, and ends there at the latest.
	var all []string
	end := ""
	for i, p := range pages {
		if errs[i] != nil {
			continue
		}
		all = append(all, p.URLs...)
		if p.Next != "" && (end == "" || p.Next < end) {
			end = p.Next
		}
	}
	slices.Sort(all)
	all = slices.Compact(all)
	if end != "" {
		n, found := slices.BinarySearch(all, end)
		if found {
			n++
		}
		all = all[:n]
	}
	page := URLQuery{Limit: limit}.Cut(all)
	if end != "" && page.Next == "" {
		// Every URL up to end is in the page, which may be empty (a
		// scheduler read its index that far and found none in the state).
		page.Next = end
	}
	return page
}

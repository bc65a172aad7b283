package fetch

import (
	"net/http"

	"github.com/drover-crawl/drover/page"
)

// errNotModifiedUnasked: a server answered 304 Not Modified to a request
// that carried no validator; there is no earlier capture to refer to.
const errNotModifiedUnasked = "304 Not Modified to a request without a validator: nothing to revisit"

// notModified makes a 304 a revisit of req.Prior, when the request was
// conditional; otherwise the page is stored as answered, with Err and
// Reason saying the server sent what was not asked for. A 304 has no body
// and no links: the scheduler takes the links from the URL's history.
func (f *Fetcher) notModified(res *Result, req Request, h http.Header) {
	pg := res.Page
	if !req.Prior.Conditional() {
		pg.Err = errNotModifiedUnasked
		res.Reason = page.ReasonNotModified
		return
	}
	pg.Body, pg.Truncated = nil, false
	pg.Revisit = &page.Revisit{Profile: page.RevisitNotModified, RefersToURI: req.Prior.RefersTo(pg.URL), RefersToDate: req.Prior.Date, Digest: req.Prior.Digest}
	res.Unchanged = page.RevisitNotModified
	res.Capture = validators(&page.Capture{Status: req.Prior.Status, Digest: req.Prior.Digest, Date: req.Prior.Date, URI: req.Prior.URI}, h, req.Prior)
}

// capture records what the fetch history keeps of a 2xx page, unless the
// campaign keeps none. A page whose payload has the digest of req.Prior
// is a revisit of it: its links were extracted all the same (they are
// the page's), and its body is not stored again. A truncated body is
// never a revisit: its digest is of the part read.
func (f *Fetcher) capture(res *Result, req Request, h http.Header) {
	if f.cfg.NoHistory && req.Prior == nil {
		return
	}
	pg := res.Page
	digest := pg.BodyDigest()
	res.Capture = validators(&page.Capture{Status: pg.Status, Digest: digest, Date: pg.FetchedAt}, h, nil)
	if req.Prior != nil && !pg.Truncated && digest == req.Prior.Digest {
		SameAs(res, *req.Prior)
	}
}

// Dedupable reports whether res is a page stored in full that a capture
// of the same payload elsewhere could replace (SameAs): a 2xx with its
// whole body and a capture, not already a revisit.
func Dedupable(res Result) bool {
	pg := res.Page
	return res.Capture != nil && res.Unchanged == "" && pg != nil && pg.Err == "" && !pg.Truncated &&
		pg.Status >= 200 && pg.Status < 300 && res.Capture.Digest != ""
}

// SameAs makes res, a Dedupable page, a revisit of ref, an earlier
// capture of the same payload (ref.Digest is res's): of the URL's own
// last capture (ref.URI empty), or another URL's (ref.URI names it). Its
// body is dropped, not stored again; its links were extracted all the
// same (they are the page's), and its history refers to ref's record.
func SameAs(res *Result, ref page.Capture) {
	pg := res.Page
	pg.Release()
	pg.Body, pg.BodyFile = nil, nil
	pg.Revisit = &page.Revisit{Profile: page.RevisitIdenticalDigest, RefersToURI: ref.RefersTo(pg.URL), RefersToDate: ref.Date, Digest: ref.Digest}
	res.Unchanged = page.RevisitIdenticalDigest
	res.Capture.Date, res.Capture.URI = ref.Date, ref.URI
}

// validators sets c's ETag and Last-Modified from the response header h,
// or, where h has none, from prior's.
func validators(c *page.Capture, h http.Header, prior *page.Capture) *page.Capture {
	c.ETag, c.LastModified = h.Get("ETag"), h.Get("Last-Modified")
	if prior != nil {
		if c.ETag == "" {
			c.ETag = prior.ETag
		}
		if c.LastModified == "" {
			c.LastModified = prior.LastModified
		}
	}
	return c
}

package replay

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/chromedp/cdproto/network"
)

// recorder keeps the current page's requests from the tab's network
// events. event runs on chromedp's reading goroutine; the others on
// LoadPages'.
type recorder struct {
	mu       sync.Mutex
	page     PageReport
	docID    network.RequestID            // the page's own request; "" until seen
	inflight map[network.RequestID]string // request -> its current URL
	changed  chan struct{}                // closed and replaced when a request ends
}

func newRecorder() *recorder {
	return &recorder{inflight: map[network.RequestID]string{}, changed: make(chan struct{})}
}

// begin starts recording page's load.
func (r *recorder) begin(page string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.page = PageReport{URL: page}
	r.docID = ""
	clear(r.inflight)
}

// end returns what was recorded since begin.
func (r *recorder) end() PageReport {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.page
	p.Requests = slices.Clone(p.Requests)
	p.Failures = slices.Clone(p.Failures)
	return p
}

// waitIdle waits until no request of the page is in flight. On ctx's end
// its error names the requests still in flight.
func (r *recorder) waitIdle(ctx context.Context) error {
	for {
		r.mu.Lock()
		if len(r.inflight) == 0 {
			r.mu.Unlock()
			return nil
		}
		ch := r.changed
		var pending []string
		for _, u := range r.inflight {
			pending = append(pending, u)
		}
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			slices.Sort(pending)
			return fmt.Errorf("requests still in flight: %s: %w", strings.Join(pending, ", "), ctx.Err())
		}
	}
}

// event takes the network events of the tab.
func (r *recorder) event(ev any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		r.requested(ev)
	case *network.EventResponseReceived:
		if ev.RequestID == r.docID {
			r.page.Status = int(ev.Response.Status)
		}
		if ev.Response.Status >= 400 {
			r.fail(ev.Response.URL, describe(int(ev.Response.Status)))
		}
	case *network.EventLoadingFinished:
		r.ended(ev.RequestID)
	case *network.EventLoadingFailed:
		reason := ev.ErrorText
		if ev.BlockedReason != "" {
			reason += " (blocked: " + string(ev.BlockedReason) + ")"
		}
		if ev.Canceled {
			reason += " (canceled)"
		}
		if u, ok := r.inflight[ev.RequestID]; ok {
			r.fail(u, reason)
		}
		r.ended(ev.RequestID)
	}
}

// requested notes a request, or the next hop of a redirected one (same
// ID, new URL).
// Requests the browser makes of its own accord are left out.
func (r *recorder) requested(ev *network.EventRequestWillBeSent) {
	if ev.Request == nil {
		return
	}
	u := ev.Request.URL
	if ev.Type == network.ResourceTypeOther && ev.Initiator != nil && ev.Initiator.Type == network.InitiatorTypeOther {
		return // the browser's own, such as the tab's icon: no part of the page, and made at any time
	}
	if r.docID == "" && ev.Type == network.ResourceTypeDocument && key(u) == key(r.page.URL) {
		r.docID = ev.RequestID
	}
	if ev.RedirectResponse != nil && ev.RequestID == r.docID {
		r.page.Status = int(ev.RedirectResponse.Status)
	}
	r.inflight[ev.RequestID] = u
	if ev.RequestID != r.docID && (strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://")) {
		r.page.Requests = append(r.page.Requests, u)
	}
}

func (r *recorder) fail(u, reason string) {
	r.page.Failures = append(r.page.Failures, Failure{Page: r.page.URL, URL: u, Reason: reason})
}

func (r *recorder) ended(id network.RequestID) {
	if _, ok := r.inflight[id]; !ok {
		return
	}
	delete(r.inflight, id)
	close(r.changed)
	r.changed = make(chan struct{})
}

package frontier

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// urlList answers OpURLs (`starter urls`): a page of the URLs of one host
// of the campaign key in one state, in URL order. Leased and held URLs come
// from the campaign's actor, which copies those of the host (its queue and
// its leases: bounded by what the scheduler holds of one host) and sorts
// nothing on its loop; parked ones from its park mover (what it holds:
// parkMovePrefetch messages per park queue at most), off the loop; failed
// ones from the failure records, read off the loop. Done and queued URLs
// are not listable (session.ListableStates).
func (s *Server) urlList(key string, q session.URLQuery) (session.URLPage, error) {
	if q.Limit <= 0 || q.Limit > session.MaxURLsPage {
		return session.URLPage{}, fmt.Errorf("urls: limit %d: must be between 1 and %d", q.Limit, session.MaxURLsPage)
	}
	host := strings.ToLower(q.Host)
	var urls []string
	switch q.State {
	case session.URLLeased, session.URLHeld:
		a, _ := s.existingActor(key) // a closed campaign holds nothing
		if a != nil {
			a.call(func() { urls = a.hostURLs(host, q.State == session.URLLeased) })
		}
	case session.URLParked:
		a, _ := s.existingActor(key)
		var m *parkMover
		if a != nil {
			a.call(func() { m = a.mover })
		}
		if m != nil {
			m.parkedURLs(func(u urlMsg, _ time.Time) bool {
				if h, err := urlrule.HTTPHostKey(u.URL); err == nil && h == host {
					urls = append(urls, u.URL)
				}
				return true
			})
		}
	case session.URLFailed:
		fs, err := s.store.Failures(key, "")
		if err != nil {
			return session.URLPage{}, err
		}
		for _, f := range fs {
			if h, err := urlrule.HTTPHostKey(f.URL); err == nil && h == host {
				urls = append(urls, f.URL)
			}
		}
	default:
		return session.URLPage{}, fmt.Errorf("urls: state %q cannot be listed: give one of %s (a scheduler keeps hashes of done and queued URLs, not the URLs)",
			q.State, strings.Join(session.ListableStates, ", "))
	}
	slices.Sort(urls)
	return q.Cut(slices.Compact(urls)), nil
}

// hostURLs copies the URLs of host that are leased, or held waiting for
// the host's turn. Actor goroutine only.
func (a *campaignActor) hostURLs(host string, leased bool) []string {
	h := a.hosts[host]
	if h == nil {
		return nil
	}
	var out []string
	if leased {
		for _, l := range a.leases {
			if l.e != nil && l.h == h {
				out = append(out, l.e.msg.URL)
			}
		}
		return out
	}
	for _, e := range h.queue {
		out = append(out, e.msg.URL)
	}
	return out
}

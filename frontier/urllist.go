package frontier

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// urlList answers OpURLs (`starter urls`): a page of the URLs of one host
// of the campaign key in one state, in URL order. Leased and held URLs come
// from the campaign's actor, which copies those of the host (its queue and
// its leases: bounded by what the scheduler holds of one host) and sorts
// nothing on its loop; parked ones from its park mover (what it holds:
// parkMovePrefetch messages per park queue at most), off the loop; failed
// ones from the failure records, read off the loop; queued ones from the
// seen store's URL index (queuedURLs). Done URLs are not listable
// (session.ListableStates).
func (s *Server) urlList(key string, q session.URLQuery) (session.URLPage, error) {
	if q.Limit <= 0 || q.Limit > session.MaxURLsPage {
		return session.URLPage{}, fmt.Errorf("urls: limit %d: must be between 1 and %d", q.Limit, session.MaxURLsPage)
	}
	if len(q.Among) > session.MaxURLsPage {
		return session.URLPage{}, fmt.Errorf("urls: %d URLs asked about, at most %d", len(q.Among), session.MaxURLsPage)
	}
	if q.Among != nil {
		a, _ := s.existingActor(key)
		c, err := newPastCheck(s, key, a)
		if err != nil {
			return session.URLPage{}, err
		}
		return c.pastQueued(q.Among)
	}
	host := strings.ToLower(q.Host)
	var urls []string
	switch q.State {
	case session.URLQueued:
		a, ended := s.existingActor(key)
		if ended != nil {
			return session.URLPage{}, nil // a closed campaign's index went with its marks
		}
		c, err := newPastCheck(s, key, a) // a is nil where the campaign only seeded
		if err != nil {
			return session.URLPage{}, err
		}
		return c.queuedURLs(host, q)
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
		return session.URLPage{}, fmt.Errorf("urls: state %q cannot be listed: give one of %s (a scheduler keeps hashes of done URLs, not the URLs)",
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

// indexed is the URL index's entries of us.
func indexed(us []shardURL) []seen.HostURL {
	out := make([]seen.HostURL, len(us))
	for i, u := range us {
		out[i] = seen.HostURL{Host: u.host, URL: u.m.URL}
	}
	return out
}

// maxIndexScan bounds the URL index entries one page of queued URLs
// reads: a host whose indexed URLs are mostly done gets short pages (or
// empty ones) with a cursor, rather than a read of all its URLs.
const maxIndexScan = 16 * session.MaxURLsPage

// queuedURLs is a page of host's URLs that this scheduler queued and
// holds as nothing since: its URL index from q.After on, each URL kept
// when its mark is queued (not done), it has no failure record, and the
// campaign's actor neither holds, leases nor parks it. A URL that another
// scheduler holds or recorded is still listed here; Client.URLs asks the
// others about the page (pastQueued).
func (c *pastCheck) queuedURLs(host string, q session.URLQuery) (session.URLPage, error) {
	var out []string
	after := q.After
	for scanned := 0; scanned < maxIndexScan; {
		chunk, err := c.s.store.HostURLs(c.key, host, after, 512)
		if err != nil || len(chunk) == 0 {
			return session.URLPage{URLs: out}, err
		}
		past, err := c.of(chunk)
		if err != nil {
			return session.URLPage{}, err
		}
		for i, u := range chunk {
			if past[i] != stillQueued {
				continue
			}
			if out = append(out, u); len(out) == q.Limit {
				return session.URLPage{URLs: out, Next: u}, nil
			}
		}
		scanned += len(chunk)
		after = chunk[len(chunk)-1]
	}
	return session.URLPage{URLs: out, Next: after}, nil
}

// pastQueued is the page of urls that this scheduler holds past queued
// (session.URLQuery.Among).
func (c *pastCheck) pastQueued(urls []string) (session.URLPage, error) {
	past, err := c.of(urls)
	if err != nil {
		return session.URLPage{}, err
	}
	var out []string
	for i, u := range urls {
		if past[i] == pastQueue {
			out = append(out, u)
		}
	}
	return session.URLPage{URLs: out}, nil
}

type queuedness int

const (
	notQueued   queuedness = iota // no mark: never queued here
	stillQueued                   // marked queued, and nothing since
	pastQueue                     // leased, held, parked, done or failed here
)

// pastCheck says where URLs stand here past their queued mark: the
// campaign's failure records and parked URLs are read once, when it is
// made.
type pastCheck struct {
	s      *Server
	key    string
	a      *campaignActor // nil: the campaign is not open here
	failed map[string]bool
	parked map[seen.Key]bool
}

func newPastCheck(s *Server, key string, a *campaignActor) (*pastCheck, error) {
	fs, err := s.store.Failures(key, "")
	if err != nil {
		return nil, err
	}
	c := &pastCheck{s: s, key: key, a: a, failed: map[string]bool{}, parked: map[seen.Key]bool{}}
	for _, f := range fs {
		c.failed[f.URL] = true
	}
	if a == nil {
		return c, nil
	}
	var m *parkMover
	a.call(func() { m = a.mover })
	if m != nil {
		m.parkedURLs(func(u urlMsg, _ time.Time) bool {
			c.parked[seen.KeyOf(u.URL)] = true
			return true
		})
	}
	return c, nil
}

// of says of each of urls whether this scheduler queued it and holds it
// as nothing since, or holds it past queued.
func (c *pastCheck) of(urls []string) ([]queuedness, error) {
	keys := make([]seen.Key, len(urls))
	for i, u := range urls {
		keys[i] = seen.KeyOf(u)
	}
	marked, err := c.s.store.Queued(c.key, keys)
	if err != nil {
		return nil, err
	}
	held := make([]bool, len(keys))
	if c.a != nil {
		c.a.call(func() {
			for i, k := range keys {
				_, held[i] = c.a.held[k]
			}
		})
	}
	out := make([]queuedness, len(urls))
	for i, k := range keys {
		switch {
		case c.failed[urls[i]] || held[i] || c.parked[k]:
			out[i] = pastQueue
		case !marked[i]:
			out[i] = notQueued
		default:
			done, err := c.s.store.Done(c.key, k)
			if err != nil {
				return nil, err
			}
			out[i] = stillQueued
			if done {
				out[i] = pastQueue
			}
		}
	}
	return out, nil
}

package frontier

import (
	"strings"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// urlState says where one URL stands here (`starter url`): leased or held
// by the campaign's actor, else what the seen store knows (a failure
// record, a done or queued mark), else unknown. raw is normalized as the
// campaign normalizes its URLs.
func (s *Server) urlState(key, raw string) (session.URLState, error) {
	st, err := s.urlMarks(key, raw)
	if err == nil && st.URL != "" {
		st.Last = s.lastFetch(key, seen.KeyOf(st.URL))
	}
	return st, err
}

// lastFetch reads what the fetch history of the campaign's lineage holds
// of k: the running actor's lineage, else the ID of key (a run that read
// another lineage with From, once ended, is looked up under its own ID).
func (s *Server) lastFetch(key string, k seen.Key) *session.LastFetch {
	lineage, _, _ := strings.Cut(key, campaign.RunSep)
	if a, _ := s.existingActor(key); a != nil {
		lineage = a.lineage
	}
	b, err := s.store.History(lineage, k)
	if err != nil || b == nil {
		return nil
	}
	d, err := decodeHistory(b, false)
	if err != nil {
		return nil
	}
	return &session.LastFetch{Lineage: lineage, Status: d.capture.Status, Date: d.capture.Date, Digest: d.capture.Digest,
		Fetched: d.revisit.Fetched, NextDue: d.revisit.Due}
}

// urlMarks is urlState without the history.
func (s *Server) urlMarks(key, raw string) (session.URLState, error) {
	a, ended := s.existingActor(key)
	var drop []string
	if a != nil {
		drop = a.cfg.DropParams
	}
	u, err := urlrule.Normalize(raw, nil, drop)
	if err != nil {
		return session.URLState{}, err
	}
	st := session.URLState{URL: u, State: session.URLUnknown, Scheduler: s.cfg.Name}
	k := seen.KeyOf(u)
	if a != nil && a.call(func() { a.fillURLState(&st, k) }) && st.State != session.URLUnknown {
		return st, nil
	}
	fs, err := s.store.Failures(key, "")
	if err != nil {
		return st, err
	}
	for i := range fs {
		if fs[i].URL == u {
			st.State, st.Failure = session.URLFailed, &fs[i]
			return st, nil
		}
	}
	if ended != nil {
		// Closed: its marks were deleted with its queues; its failure
		// records stay until a later run of the ID.
		st.State = session.URLEnded
		return st, nil
	}
	if done, err := s.store.Done(key, k); err != nil || done {
		if done {
			st.State = session.URLDone
		}
		return st, err
	}
	q, err := s.store.Queued(key, []seen.Key{k})
	if err == nil && q[0] {
		st.State = session.URLQueued
	}
	return st, err
}

// fillURLState sets st from what the actor holds of key: leased or held.
// Actor goroutine only.
func (a *campaignActor) fillURLState(st *session.URLState, k seen.Key) {
	e, ok := a.held[k]
	if !ok {
		if a.mover != nil {
			a.mover.parkedURLs(func(m urlMsg, due time.Time) bool {
				if seen.KeyOf(m.URL) == k {
					st.State, st.ParkedUntil = session.URLParked, due
					return false
				}
				return true
			})
		}
		return
	}
	st.State, st.Attempt = session.URLHeld, e.attempt
	for _, l := range a.leases {
		if l.e == e {
			st.State, st.LeaseDeadline = session.URLLeased, l.deadline
			break
		}
	}
	if h, err := urlrule.HTTPHostKey(e.msg.URL); err == nil {
		if hs := a.hosts[h]; hs != nil {
			st.Host, st.HostQueue, st.HostNext = h, len(hs.queue), hs.next
		}
	}
}

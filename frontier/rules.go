package frontier

import (
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/session"
)

// Live rules (campaign.Rules): excludes and host rules an operator adds to
// a running campaign. The workflow sends them to every scheduler
// (session.OpRules); a scheduler stores them with the campaign's marks
// (seen.Store.SetRules), so that they outlive its restart, and its actor
// applies them:
//
//   - an exclude settles, as failures of reason "excluded", every URL it
//     matches that the actor holds now, and every one that reaches it later
//     from a queue (queued, parked or sent back); links it matches are
//     not published. Its reply waits until no lease out matches it, so
//     that once it returns no request for a matching URL starts.
//   - a host rule sets the host's delay, concurrency and block, from its
//     next lease on.
//
// A rules version lower than the one held is ignored (an older update
// arriving late).

// ReasonExcluded: an operator's exclude, added while the campaign ran,
// matched the URL before it was fetched.
const ReasonExcluded = session.ReasonExcluded

// liveRules is what an actor keeps of its campaign's live rules.
type liveRules struct {
	rules    campaign.Rules
	excludes []*regexp.Regexp
}

func compileRules(r campaign.Rules) (liveRules, error) {
	lr := liveRules{rules: r}
	for _, s := range r.Exclude {
		re, err := regexp.Compile(s)
		if err != nil {
			return liveRules{}, fmt.Errorf("exclude %q: %w", s, err)
		}
		lr.excludes = append(lr.excludes, re)
	}
	return lr, nil
}

// excluded returns the live exclude u matches, or "".
func (lr *liveRules) excluded(u string) string {
	for _, re := range lr.excludes {
		if re.MatchString(u) {
			return re.String()
		}
	}
	return ""
}

// latestRules is the newer of the rules a config carries and those stored
// here for the campaign.
func (s *Server) latestRules(key string, given campaign.Rules) (campaign.Rules, error) {
	raw, err := s.store.Rules(key)
	if err != nil || raw == nil {
		return given, err
	}
	var stored campaign.Rules
	if err := json.Unmarshal(raw, &stored); err != nil {
		return given, fmt.Errorf("stored rules of %s: %w", key, err)
	}
	if stored.Version > given.Version {
		return stored, nil
	}
	return given, nil
}

// setRules stores a campaign's live rules and has its actor, if it has one
// here, apply them (and push them to its fetcher sessions); it returns
// once no lease out matches an exclude (at most the longest a lease
// lives), with the count of the campaign's sessions here that did not
// ask for pushed rules (stale).
func (s *Server) setRules(ctx context.Context, key string, r campaign.Rules) (stale int, err error) {
	if err := r.Validate(); err != nil {
		return 0, err
	}
	a, err := s.takeRules(key, r)
	if err != nil || a == nil {
		return 0, err
	}
	a.call(func() {
		for sess := range a.sessions {
			if !sess.rules {
				stale++
			}
		}
	})
	return stale, a.waitLeasesClear(ctx, s.cfg.MaxLease+time.Second)
}

// errNarrowerScope refuses a fetcher session that lacks a live include
// and takes no pushed rules: it is ended (Refused.Ended), as if by its
// campaign, so that its worker returns and the workflow starts it again
// with the campaign's config, rather than redial into the same refusal.
var errNarrowerScope = errors.New("this fetcher's config lacks a live include of its campaign, and it does not take pushed rules (a worker from before them: upgrade it); its campaign starts it again with the include")

// narrowerScope refuses a fetcher session that does not take pushed rules
// (a worker from before FrameRules) when its config lacks a live include
// the campaign has here: it started before the include and was not among
// the sessions the workflow restarted for it (between schedulers then),
// and would judge links by the narrower scope for its whole life. Refused,
// its activity fails and the workflow starts it again with the campaign's
// config. Actor goroutine only.
func (a *campaignActor) narrowerScope(sess *fetcherSession) error {
	if sess.rules {
		return nil
	}
	for _, re := range a.cfg.Live.Include {
		if !slices.Contains(sess.includes, re) {
			return fmt.Errorf("%w (include %q, rules version %d)", errNarrowerScope, re, a.cfg.Live.Version)
		}
	}
	return nil
}

// pushRules sends the campaign's live rules to fetcher session sess when
// they are newer than the ones it has and it asked for them (FrameRules):
// a live include widens its scope from its next page on. Actor goroutine
// only.
func (a *campaignActor) pushRules(sess *fetcherSession) {
	if r := a.cfg.Live; sess.rules && r.Version > sess.rulesVersion {
		sess.rulesVersion = r.Version
		sess.send(session.FrameRules, r)
	}
}

// takeRules stores r as the campaign's rules unless newer ones are stored,
// and has its actor here, if any, apply them (it ignores rules no newer
// than its own). It holds createMu, as making an actor does, so that an
// actor made meanwhile reads them, and two calls never store an older
// version over a newer one.
func (s *Server) takeRules(key string, r campaign.Rules) (*campaignActor, error) {
	s.createMu.Lock()
	defer s.createMu.Unlock()
	a, err := s.existingActor(key)
	if err != nil {
		return nil, err
	}
	latest, err := s.latestRules(key, r)
	if err != nil {
		return nil, err
	}
	if latest.Version == r.Version {
		raw, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if err := s.store.SetRules(key, raw); err != nil {
			return nil, err
		}
	}
	if a == nil {
		return nil, nil // the actor made later reads them (newCampaignActor)
	}
	lr, err := compileRules(latest)
	if err != nil {
		return nil, err
	}
	if !a.call(func() { a.applyRules(lr, time.Now()) }) {
		return nil, fmt.Errorf("campaign %s is closing on this scheduler", key)
	}
	return a, nil
}

// applyRules takes newer live rules: host rules for the hosts it knows,
// and the excludes over what it holds. Actor goroutine only.
func (a *campaignActor) applyRules(lr liveRules, now time.Time) {
	if lr.rules.Version <= a.live.Load().rules.Version {
		return
	}
	a.live.Store(&lr)
	a.cfg.Live = lr.rules
	if _, err := a.scope.TakeRules(lr.rules); err != nil {
		a.log.Error("live includes not taken for sitemaps", "version", lr.rules.Version, "err", err)
	}
	for sess := range a.sessions {
		a.pushRules(sess)
	}
	for name, h := range a.hosts {
		h.delay, h.conc = a.cfg.PolitenessFor(name)
		if h.robots != nil {
			// robots.txt's Crawl-delay wins when larger, as when it came.
			if cd := h.robots.CrawlDelay(); cd > h.delay {
				h.delay = min(cd, 10*time.Minute)
			}
		}
		if b := a.cfg.HostBlockedUntil(name); b.After(h.next) {
			h.next = b
		}
		kept := h.queue[:0]
		for _, e := range h.queue {
			if re := lr.excluded(e.msg.URL); re != "" {
				delete(a.held, e.key)
				a.settler().dropRecorded(e, ReasonExcluded, "excluded by "+re)
				continue
			}
			kept = append(kept, e)
		}
		clear(h.queue[len(kept):])
		h.queue = kept
		heap.Init(&h.queue)
		// A host blocked, or slowed, past the hold window parks what it
		// holds, as after an outcome: its deliveries must not sit unacked.
		if wait := h.next.Sub(now); wait > holdWindow && len(h.queue) > 0 {
			a.settler().parkHost(h, wait)
		} else {
			a.settler().trimHost(h, now)
		}
		a.leaser().place(h, now)
	}
	a.log.Info("live rules applied", "version", lr.rules.Version, "excludes", len(lr.rules.Exclude), "hosts", len(lr.rules.Hosts))
}

// waitLeasesClear returns once no lease out matches a live exclude, or
// fails after within.
func (a *campaignActor) waitLeasesClear(ctx context.Context, within time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n := 0
		if !a.call(func() {
			for _, l := range a.leases {
				if l.e != nil && a.live.Load().excluded(l.e.msg.URL) != "" {
					n++
				}
			}
		}) {
			return nil // ended: no lease is out
		}
		if n == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("%d leases of excluded URLs still out after %s", n, within)
		}
	}
}

package frontier

import (
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/urlrule"
)

// A campaign's hosts in memory are the hosts it is crawling, not every
// host it has seen: a host idle for ServerConfig.HostIdle is forgotten,
// and made again by its next URL. What a host holds (its robots.txt rules,
// its politeness and turn, a map entry) was about 0.9 KB of live heap once
// its URLs were done, which at millions of hosts is gigabytes. What is
// kept of a forgotten host is its count of pages fetched, for
// max-pages-per-host and the policies that weigh it (Item.HostFetched).

// forgetSweep is how often the idle hosts are swept with the default
// HostIdle: every host is looked at, so not every second.
const forgetSweep = 5 * time.Second

// newHost makes the host of hostName for its first URL, rawURL (or its
// first since it was forgotten).
func (a *campaignActor) newHost(hostName, rawURL string) *host {
	delay, conc := a.cfg.PolitenessFor(hostName)
	h := &host{name: strings.Clone(hostName), clock: strings.Clone(a.clockKey(hostName)), root: strings.Clone(urlrule.Origin(rawURL)), delay: delay, conc: conc, index: -1,
		next: a.cfg.HostBlockedUntil(hostName)}
	if fetched, ok := a.forgotten[hostName]; ok {
		h.fetched = fetched
		delete(a.forgotten, hostName)
	}
	a.hosts[h.name] = h
	a.nhosts.Store(int64(len(a.hosts) + len(a.forgotten)))
	a.nforgotten.Store(int64(len(a.forgotten)))
	return h
}

// forgetIdleHosts forgets the hosts idle for ServerConfig.HostIdle. It
// sweeps every forgetSweep, or every HostIdle when that is shorter (at
// most once a second: the actor's tick).
func (a *campaignActor) forgetIdleHosts(now time.Time) {
	idle := a.srv.cfg.HostIdle
	if idle < 0 || now.Before(a.forgetAt) {
		return
	}
	a.forgetAt = now.Add(min(forgetSweep, max(idle, time.Second)))
	for name, h := range a.hosts {
		if a.forgettable(h, now, idle) {
			a.forgotten[name] = h.fetched
			delete(a.hosts, name)
		}
	}
	a.nforgotten.Store(int64(len(a.forgotten)))
}

// forgettable reports whether nothing of the campaign's needs h: no URL
// held or leased, no robots or resolve lease out, in no heap or line, no
// start asked of another scheduler (an ask past its askBy counts as lost),
// not down nor counting failures toward it, and its next allowed start
// idle ago. A host down for the campaign is kept: its verdict fails its
// URLs without a fetch.
func (a *campaignActor) forgettable(h *host, now time.Time, idle time.Duration) bool {
	switch {
	case len(h.queue) > 0 || h.inflight > 0 || h.where != inNone:
		return false
	case h.robotsState == robotsFetching || h.ip == ipResolving:
		return false
	case h.down || len(h.downs) > 0:
		return false
	case h.remote.asking && now.Before(h.remote.askBy), now.Before(h.remote.grant):
		return false
	case now.Sub(h.next) < idle:
		return false
	}
	if _, waiting := a.keyWaiting[h.clock][h]; waiting {
		return false
	}
	// An ask's hosts include its asker.
	if ka := a.keyAsks[h.clock]; ka != nil && slices.Contains(ka.hosts, h) {
		return false
	}
	return true
}

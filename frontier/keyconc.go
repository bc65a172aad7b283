package frontier

import "time"

// A campaign keyed by domain or group (campaign.Config.PolitenessKey)
// counts its requests in flight per key as well as per host: the hosts of
// a key together have at most the concurrency of the host asking, so
// that a domain of many host names sees the requests of one. Other
// campaigns on the key count their own: only the delay is shared between
// campaigns (clocks.go).

// keyed reports whether h's politeness key is not its host name.
func (h *host) keyed() bool { return h.clock != h.name }

// keyFull reports whether h's key has as many leases out as h may have.
func (a *campaignActor) keyFull(h *host) bool {
	return h.keyed() && a.keyInflight[h.clock] >= max(h.conc, 1)
}

// waitKey puts h aside until a lease of its key ends.
func (a *campaignActor) waitKey(h *host) {
	w := a.keyWaiting[h.clock]
	if w == nil {
		w = map[*host]struct{}{}
		a.keyWaiting[h.clock] = w
	}
	w[h] = struct{}{}
}

// keyLeased counts a lease of h against its key, and returns the key it
// counted against ("" for none): a host keyed by IP may change keys
// while the lease is out.
func (a *campaignActor) keyLeased(h *host) string {
	if !h.keyed() {
		return ""
	}
	a.keyInflight[h.clock]++
	return h.clock
}

// keyEnded counts a lease off key (keyLeased's), and places the hosts that
// waited for it.
func (a *campaignActor) keyEnded(key string, now time.Time) {
	if key == "" {
		return
	}
	if a.keyInflight[key]--; a.keyInflight[key] <= 0 {
		delete(a.keyInflight, key)
	}
	w := a.keyWaiting[key]
	delete(a.keyWaiting, key)
	for hh := range w {
		a.place(hh, now)
	}
}

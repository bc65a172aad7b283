package frontier

import "time"

// A host's requests in flight are counted per politeness key over every
// campaign of the scheduler (keyshare.go) as well as per host: the hosts
// of a domain or group key together, and the campaigns on one key
// together, have at most the concurrency of the host asking, so that a
// domain of many host names, or a host two campaigns crawl, sees the
// requests of one.
//
// keyLine is that view of the campaign's actor: its hosts waiting for a
// place under their key (keyWaiting), and the lines they stand in. Actor
// goroutine only.
type keyLine struct{ *campaignActor }

// keyLine returns a's keyLine.
func (a *campaignActor) keyLine() keyLine { return keyLine{a} }

// full reports whether h's key has as many leases out as h may have,
// or its free places are held for other campaigns.
func (a keyLine) full(h *host, now time.Time) bool {
	return a.srv.places.full(h.clock, a.key, h.conc, now)
}

// wait puts h aside until a lease of its key ends, and the campaign in
// line for the key's next place.
func (a keyLine) wait(h *host) {
	key := h.clock
	w := a.keyWaiting[key]
	if w == nil {
		w = map[*host]struct{}{}
		a.keyWaiting[key] = w
	}
	w[h] = struct{}{}
	a.srv.places.wait(key, a.key, func() {
		// On the other campaign's loop: post without waiting, so that
		// two actors waking each other never wait on each other.
		go a.post(func() { a.placeWaiting(key, time.Now()) })
	})
}

// leased counts a lease of h against its key, and returns the key it
// counted against: a host keyed by IP may change keys while the lease is
// out.
func (a keyLine) leased(h *host) string {
	a.srv.places.take(h.clock, a.key)
	return h.clock
}

// ended counts a lease off key (leased's), and places the hosts that
// waited for it.
func (a keyLine) ended(key string, now time.Time) {
	if key == "" {
		return
	}
	a.srv.places.release(key, a.key, now)
	a.placeWaiting(key, now)
}

// placeWaiting places the hosts that wait for a place under key.
func (a keyLine) placeWaiting(key string, now time.Time) {
	w := a.keyWaiting[key]
	delete(a.keyWaiting, key)
	for h := range w {
		a.leaser().place(h, now)
	}
}

// leave takes the campaign out of every key's line, as it stops.
func (a keyLine) leave() {
	for key := range a.keyWaiting {
		a.srv.places.leave(key, a.key)
	}
	clear(a.keyWaiting)
}

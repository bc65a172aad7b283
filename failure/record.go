// Package failure holds what a scheduler keeps of a URL that did not
// become a page. A leaf: the seen store, the session protocol and the
// starter share it without linking one another.
package failure

import "time"

// Record is a URL that did not become a page: why, how many times
// it was tried, the last error, and when it failed first and last. The
// scheduler's seen store keeps them; OpFailures returns them.
type Record struct {
	URL       string    `json:"url"`
	Reason    string    `json:"reason"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	First     time.Time `json:"first"`
	Last      time.Time `json:"last"`
}

// Merge returns old updated by a newer record of the same URL: f, with
// the earlier of the two First times.
func (old Record) Merge(f Record) Record {
	if !old.First.IsZero() && (f.First.IsZero() || old.First.Before(f.First)) {
		f.First = old.First
	}
	return f
}

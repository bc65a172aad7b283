package session

import "time"

// FailureRecord is a URL that did not become a page: why, how many times
// it was tried, the last error, and when it failed first and last. The
// scheduler's seen store keeps them; OpFailures returns them.
type FailureRecord struct {
	URL       string    `json:"url"`
	Reason    string    `json:"reason"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error"`
	First     time.Time `json:"first"`
	Last      time.Time `json:"last"`
}

// Merge returns old updated by a newer record of the same URL: f, with
// the earlier of the two First times.
func (old FailureRecord) Merge(f FailureRecord) FailureRecord {
	if !old.First.IsZero() && (f.First.IsZero() || old.First.Before(f.First)) {
		f.First = old.First
	}
	return f
}

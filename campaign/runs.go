// Runs of a campaign ID: a run's name, the frontier key (ID~Run) its
// queues, marks and records live under, and the lineage its fetch
// history goes to.

package campaign

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// runPattern is the form of Config.Run.
var runPattern = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// RunSep joins a campaign ID and its run in a frontier key; no ID holds it.
const RunSep = "~"

// FrontierKey names this run of the campaign in the frontier: the ID, and
// the run when there is one (ID~Run). Queue names, seen marks, failure
// records and the schedulers' campaign state all use it.
func (c Config) FrontierKey() string {
	if c.Run == "" {
		return c.ID
	}
	return c.ID + RunSep + c.Run
}

// HistoryKey names the lineage whose fetch history this run reads (when
// From is set) and writes (unless NoHistory): From, or else the ID. So
// runs started with --from news all read and extend the history of news,
// and a run without it starts the lineage of its own ID.
func (c Config) HistoryKey() string {
	if c.From != "" {
		return c.From
	}
	return c.ID
}

// NewRun names a run that starts at t, with random bits told apart from
// another run started in the same millisecond: the time in base 36 (9
// digits, enough for 3,000 years), then 4 random ones. The runs of one ID
// sort in the order they started (RunAfter).
func NewRun(t time.Time, random uint64) string {
	const digits = 9
	ts := strconv.FormatInt(max(t.UnixMilli(), 0), 36)
	r := strconv.FormatUint(random%(36*36*36*36), 36)
	return strings.Repeat("0", max(digits-len(ts), 0)) + ts + strings.Repeat("0", 4-len(r)) + r
}

// RunAfter reports whether frontier key a names a later run of its
// campaign than key b: a key without a run (a campaign started before
// runs had names) comes before every run.
func RunAfter(a, b string) bool {
	_, ra, _ := strings.Cut(a, RunSep)
	_, rb, _ := strings.Cut(b, RunSep)
	return ra > rb
}

func (c Config) validRun() error {
	if c.Run != "" && !runPattern.MatchString(c.Run) {
		return fmt.Errorf("run %q: must be 1-16 lower-case letters or digits (the workflow names its run; leave it out)", c.Run)
	}
	return nil
}

// KeyID is the campaign ID of a frontier key (FrontierKey).
func KeyID(key string) string {
	id, _, _ := strings.Cut(key, RunSep)
	return id
}

// Package seen is a scheduler's record of the URLs a campaign has queued
// and done (the dedup marks) and of the URLs that did not become a page
// (failure records): the Store interface, Pebble (on disk, the production
// store), Memory (for tests and throwaway runs) and QueuedCache (Queued
// answers from memory in front of either). It knows nothing of RabbitMQ or
// of the frontier: the frontier decides when a mark may be written.
package seen

import (
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/failure"
)

// Key is the 128-bit dedup key of a normalized URL.
type Key [16]byte

// KeyOf returns the dedup key of a normalized URL.
func KeyOf(url string) Key {
	h := fnv.New128a()
	h.Write([]byte(url))
	var k Key
	h.Sum(k[:0])
	return k
}

// Store is a scheduler's durable record of the URLs a campaign has
// queued and done, keyed by the 128-bit hash of the normalized URL, and of
// the URLs that did not become a page (failure records).
//
// The two marks mean different things and must not be mixed up:
//   - queued: a publish of the URL was confirmed by RabbitMQ. It lets the
//     scheduler skip re-publishing a link. The caller writes it only after
//     the confirm: a mark written before would lose the URL for good if the
//     process died in between.
//   - done: the URL's outcome is durably recorded (sink acknowledged, links
//     published and confirmed). The caller writes it only then, and acks
//     the delivery after MarkDone returned; a delivery of a done URL is
//     acked without fetching it (a duplicate message).
//
// Once MarkQueued or MarkDone returned nil, the marks survive a crash of the
// process. Losing marks (an OS crash, a damaged store) costs duplicate
// messages or, at worst, a duplicate fetch, never a lost URL: a store that
// cannot tell answers "not seen".
//
// Failure records live apart from the marks: Drop leaves them, so that a
// campaign's failures stay readable after it ended, until DropFailures.
type Store interface {
	// Queued reports, for each key, whether it is marked queued or done.
	Queued(campaign string, keys []Key) ([]bool, error)
	// MarkQueued marks keys queued (a key already done stays done).
	MarkQueued(campaign string, keys []Key) error
	// Done reports whether key is marked done.
	Done(campaign string, key Key) (bool, error)
	// MarkDone marks keys done.
	MarkDone(campaign string, keys []Key) error
	// Drop forgets a campaign's marks (not its failure records).
	Drop(campaign string) error

	// RecordFailures stores failure records, one per URL. Recording a URL
	// again takes the new Reason, Attempts, LastError and Last and keeps
	// the earliest First.
	RecordFailures(campaign string, fs []failure.Record) error
	// Failures returns a campaign's failure records with the given reason
	// ("" for all), sorted by URL.
	Failures(campaign string, reason string) ([]failure.Record, error)
	// DropFailures forgets a campaign's failure records.
	DropFailures(campaign string) error
	// Campaigns lists, sorted, the campaigns that hold marks or failure
	// records here and whose name is id or starts with id+sep: the runs
	// of one campaign ID (campaign.Config.FrontierKey) a scheduler knows.
	Campaigns(id, sep string) ([]string, error)

	// SetRules stores a campaign's live rules (campaign.Rules as JSON),
	// replacing what it held; Rules returns them, nil when none. They
	// outlive a restart of the scheduler, so that a rule an operator added
	// holds from the first lease after it.
	SetRules(campaign string, rules []byte) error
	Rules(campaign string) ([]byte, error)

	// History returns what a lineage (campaign.Config.HistoryKey) recorded
	// of a URL's last fetch, nil when nothing; SetHistory replaces the
	// records of keys (values[i] is keys[i]'s). The values are opaque here
	// (the frontier encodes them). They outlive Drop, so that a later run
	// of the lineage reads them, until DropHistory. A history lost (a
	// crash before the WAL's fsync, a damaged store) costs a full fetch of
	// the URL, never the URL.
	History(lineage string, k Key) ([]byte, error)
	SetHistory(lineage string, keys []Key, values [][]byte) error
	DropHistory(lineage string) error

	// Schedule stores when a continuous campaign's URLs are fetched
	// again, in one durable write: each of add is set, each of remove
	// (an entry written before, by its Key and At) deleted. DueBy
	// returns the entries due at or before t, earliest first, at most
	// limit; Scheduled counts them and gives the earliest time. Drop
	// forgets them with the marks. A lost entry is a URL no longer
	// revisited: Pebble writes them with the WAL synced.
	Schedule(campaign string, add, remove []Due) error
	// Entry is the message of k's entry due at at; nil when there is
	// none.
	Entry(campaign string, at time.Time, k Key) ([]byte, error)
	DueBy(campaign string, t time.Time, limit int) ([]Due, error)
	Scheduled(campaign string) (n int64, next time.Time, err error)

	// IndexURLs adds URLs to the campaign's index by host; HostURLs lists
	// the URLs of one host in it, in URL order, after after ("" for the
	// first), at most limit. The frontier indexes the URLs it marks
	// queued, so that `starter urls` can list them; the marks alone keep
	// hashes. Drop forgets the index with the marks. An entry lost (a
	// crash before the WAL reached the disk, a damaged store) is a URL
	// missing from a list, never a URL lost.
	IndexURLs(campaign string, urls []HostURL) error
	HostURLs(campaign, host, after string, limit int) ([]string, error)

	Close() error
}

// HostURL is a URL and its host, as the URL index keys it.
type HostURL struct{ Host, URL string }

// The marks, as Memory keeps them and Pebble stores them (one byte; a
// higher one beats a lower one).
const (
	markQueued byte = 1
	markDone   byte = 2
)

func sortFailures(fs []failure.Record) {
	slices.SortFunc(fs, func(a, b failure.Record) int { return strings.Compare(a.URL, b.URL) })
}

// Fetch history: what the schedulers keep of each URL's last capture, by
// lineage (campaign.Config.HistoryKey), in the seen store, for a later
// run to ask with validators and to record an unchanged page as a revisit.

package frontier

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
	"github.com/drover-crawl/drover/urlrule"
)

// historyVersion is the first byte of an encoded history; a value of
// another version reads as no history (a full fetch). Version 1 had no
// revisit state, version 2 no capture URI; they read as histories
// without them.
const (
	historyVersion   = 3
	historyVersionV2 = 2
	historyVersionV1 = 1
)

// revisitState is what a continuous campaign keeps of a URL's schedule in
// its history: the interval that led to its next fetch, that fetch's time
// (the entry of the revisit schedule, which the next one replaces) and
// when it was last fetched, all on the scheduler's clock. Zero: none.
type revisitState struct {
	Interval     time.Duration
	Due, Fetched time.Time
}

// encodeHistory encodes a URL's capture and, when the capture has a
// validator, its links: a later 304 says the page is unchanged without
// sending it, and the crawl goes on through these. A page without a
// validator is never answered 304; its links come from its body again.
//
// Layout: version, status (uvarint), date (varint Unix ns), ETag,
// Last-Modified, digest, capture URI (uvarint length and bytes each;
// the URI is empty for the URL's own capture), the revisit
// state (interval, due and fetched, varint ns each), the link count
// (uvarint) and the links sorted by URL, front-coded: the length of the
// prefix shared with the previous URL, the rest (length and bytes), a
// flags byte (1 hops, 2 embeds, 4 score) and the fields it names. A site's
// links share their origin and path, so a link costs its distinct tail,
// about 10-20 bytes on the test web, before Pebble's block compression.
func encodeHistory(c *page.Capture, links []urlrule.Link, rs revisitState) []byte {
	b := make([]byte, 0, 64+len(c.ETag)+len(c.LastModified)+len(c.Digest)+len(c.URI)+16*len(links))
	b = append(b, historyVersion)
	b = binary.AppendUvarint(b, uint64(max(c.Status, 0)))
	b = binary.AppendVarint(b, c.Date.UnixNano())
	for _, s := range []string{c.ETag, c.LastModified, c.Digest, c.URI} {
		b = appendString(b, s)
	}
	b = binary.AppendVarint(b, int64(rs.Interval))
	b = binary.AppendVarint(b, unixNano(rs.Due))
	b = binary.AppendVarint(b, unixNano(rs.Fetched))
	if !c.Conditional() {
		links = nil
	}
	sorted := slices.Clone(links)
	slices.SortFunc(sorted, func(x, y urlrule.Link) int { return strings.Compare(x.URL, y.URL) })
	b = binary.AppendUvarint(b, uint64(len(sorted)))
	prev := ""
	for _, l := range sorted {
		n := commonPrefix(prev, l.URL)
		b = binary.AppendUvarint(b, uint64(n))
		b = appendString(b, l.URL[n:])
		b = appendLinkFields(b, l)
		prev = l.URL
	}
	return b
}

// unixNano is t in Unix nanoseconds, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func appendLinkFields(b []byte, l urlrule.Link) []byte {
	var flags byte
	if l.Hops > 0 {
		flags |= 1
	}
	if l.Embeds > 0 {
		flags |= 2
	}
	if l.Score != 0 {
		flags |= 4
	}
	b = append(b, flags)
	if l.Hops > 0 {
		b = binary.AppendUvarint(b, uint64(l.Hops))
	}
	if l.Embeds > 0 {
		b = binary.AppendUvarint(b, uint64(l.Embeds))
	}
	if l.Score != 0 {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(l.Score))
	}
	return b
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

var errHistory = errors.New("malformed fetch history")

// historyReader reads an encoded history; the first error sticks.
type historyReader struct {
	b   []byte
	err error
}

func (r *historyReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err, r.b = errHistory, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *historyReader) bytes(n uint64) []byte {
	if uint64(len(r.b)) < n {
		r.err, r.b = errHistory, nil
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *historyReader) string() string { return string(r.bytes(r.uvarint())) }

func (r *historyReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.err, r.b = errHistory, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// decodedHistory is what decodeHistory read.
type decodedHistory struct {
	capture *page.Capture
	revisit revisitState
	links   []urlrule.Link
}

// decodeHistory reads what encodeHistory wrote: the capture, the revisit
// state, and the links when withLinks.
func decodeHistory(b []byte, withLinks bool) (decodedHistory, error) {
	var d decodedHistory
	if len(b) == 0 || b[0] < historyVersionV1 || b[0] > historyVersion {
		return d, errHistory
	}
	r := &historyReader{b: b[1:]}
	c := &page.Capture{Status: int(r.uvarint())}
	c.Date = time.Unix(0, r.varint()).UTC()
	c.ETag, c.LastModified, c.Digest = r.string(), r.string(), r.string()
	if b[0] >= historyVersion {
		c.URI = r.string()
	}
	if b[0] >= historyVersionV2 {
		d.revisit = revisitState{Interval: time.Duration(r.varint()), Due: fromUnixNano(r.varint()), Fetched: fromUnixNano(r.varint())}
	}
	if r.err != nil {
		return d, r.err
	}
	d.capture = c
	if !withLinks {
		return d, nil
	}
	links, err := r.links()
	d.links = links
	return d, err
}

func (r *historyReader) links() ([]urlrule.Link, error) {
	count := r.uvarint()
	if r.err != nil || count > uint64(len(r.b)) { // each link takes at least a byte
		return nil, errHistory
	}
	links := make([]urlrule.Link, 0, count)
	prev := ""
	for range count {
		shared := r.uvarint()
		if shared > uint64(len(prev)) {
			return nil, errHistory
		}
		l := urlrule.Link{URL: prev[:shared] + r.string()}
		flags := r.bytes(1)
		if r.err != nil {
			return nil, r.err
		}
		if flags[0]&1 != 0 {
			l.Hops = int(min(r.uvarint(), math.MaxInt32))
		}
		if flags[0]&2 != 0 {
			l.Embeds = int(min(r.uvarint(), math.MaxInt32))
		}
		if flags[0]&4 != 0 {
			if v := r.bytes(8); r.err == nil {
				l.Score = math.Float64frombits(binary.LittleEndian.Uint64(v))
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		links = append(links, l)
		prev = l.URL
	}
	return links, nil
}

// prior is the capture a run that reads its lineage's history leases the
// URL with, and the history it was read from (nil: none, or the campaign
// reads no history). A history that cannot be read is no history: the URL
// is fetched in full.
func (a *campaignActor) prior(k seen.Key) (*page.Capture, []byte) {
	if a.cfg.From == "" && a.revisit.rules == nil {
		return nil, nil
	}
	b, err := a.srv.store.History(a.lineage, k)
	if err != nil {
		a.log.Error("seen store: reading a URL's fetch history; it is fetched in full", "err", err)
		return nil, nil
	}
	if b == nil {
		return nil, nil
	}
	d, err := decodeHistory(b, false)
	if err != nil {
		a.log.Warn("a URL's fetch history is unreadable; it is fetched in full", "err", err)
		return nil, nil
	}
	return d.capture, b
}

// unchangedLinks are the links a page answered 304 had when it was last
// captured, from the history its lease was given (entry.history): a 304
// comes only to a request whose validators that history held.
func (a outcomes) unchangedLinks(history []byte) []urlrule.Link {
	d, err := decodeHistory(history, true)
	if err != nil {
		a.log.Warn("a page answered 304 but its history is unreadable: its links are not followed", "err", err)
	}
	return d.links
}

// historyOf is what the record job writes to the URL's history: nil when
// the campaign keeps none, or the outcome has no capture.
func (a outcomes) historyOf(o session.Outcome) []byte {
	if a.cfg.NoHistory || o.Capture == nil {
		return nil
	}
	return encodeHistory(o.Capture, o.Links, revisitState{})
}

// writeHistory stores the histories of jobs, before their URLs are marked
// done: a record whose history could not be written is tried again, as
// one whose marks could not be.
func (a recorder) writeHistory(jobs []recordJob) error {
	var keys []seen.Key
	var vals [][]byte
	for _, j := range jobs {
		if j.history != nil {
			keys, vals = append(keys, j.e.key), append(vals, j.history)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return a.srv.store.SetHistory(a.lineage, keys, vals)
}

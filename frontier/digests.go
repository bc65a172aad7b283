// The digest index of a campaign that deduplicates by payload
// (campaign.Config.Dedup): one entry per payload a sink stored in full,
// naming the URL and date of that capture, so that a fetcher can store
// another URL's identical payload as a revisit of it. It lives in the
// lineage's fetch history (seen.Store.SetHistory), keyed by the hash of
// "digest " and the payload digest, a string no normalized URL is (a URL
// starts with its scheme): `starter forget` drops it with the history, a
// damaged store's salvage copies it with the history, and a later run of
// the lineage reads it.

package frontier

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/session"
)

// digestEntryVersion is the first byte of an encoded digest entry; it is
// no history version, so an entry can never be read as a URL's history.
const digestEntryVersion = 'D'

// digestKey is the key of a payload digest's entry.
func digestKey(digest string) seen.Key { return seen.KeyOf("digest " + digest) }

// encodeDigestEntry: version, status (uvarint), date (varint Unix ns),
// the capture's URL (uvarint length and bytes).
func encodeDigestEntry(c *page.Capture, url string) []byte {
	b := make([]byte, 0, 24+len(url))
	b = append(b, digestEntryVersion)
	b = binary.AppendUvarint(b, uint64(max(c.Status, 0)))
	b = binary.AppendVarint(b, c.Date.UnixNano())
	return appendString(b, url)
}

var errDigestEntry = errors.New("malformed digest index entry")

// decodeDigestEntry reads the capture an entry of digest names.
func decodeDigestEntry(b []byte, digest string) (*page.Capture, error) {
	if len(b) == 0 || b[0] != digestEntryVersion {
		return nil, errDigestEntry
	}
	r := &historyReader{b: b[1:]}
	c := &page.Capture{Status: int(r.uvarint()), Digest: digest}
	c.Date = time.Unix(0, r.varint()).UTC()
	c.URI = r.string()
	if r.err != nil || c.URI == "" {
		return nil, errDigestEntry
	}
	return c, nil
}

// indexedCapture is the capture a job's outcome stored in full, which the
// digest index takes: nil unless the campaign deduplicates and the page
// is a 2xx stored whole under its own URL (not a revisit).
func indexedCapture(cfg *campaign.Config, c *page.Capture, unchanged string) *page.Capture {
	if !cfg.Dedup || c == nil || unchanged != "" || c.URI != "" || c.Digest == "" || c.Status < 200 || c.Status >= 300 {
		return nil
	}
	return c
}

// indexDigests writes the digest entries of jobs' full captures. The
// record writes them before it publishes the pages' links: a link of a
// page to a copy of itself is fetched after the page's entry can be read.
// The captures are stored already (a sink stored each before its outcome
// came), so an entry written by a record that then fails names a stored
// capture all the same. The latest capture of a payload wins.
func indexDigests(store seen.Store, lineage string, jobs []recordJob) error {
	var keys []seen.Key
	var vals [][]byte
	for _, j := range jobs {
		if j.stored != nil {
			keys = append(keys, digestKey(j.stored.Digest))
			vals = append(vals, encodeDigestEntry(j.stored, j.e.msg.URL))
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return store.SetHistory(lineage, keys, vals)
}

// digestCaptures answers OpDigests: for each digest, in order, the
// capture the lineage's index names, or nil. An entry that cannot be read
// is no entry (the page is stored in full).
func (s *Server) digestCaptures(lineage string, digests []string) ([]*page.Capture, error) {
	if len(digests) > session.MaxDigestsAsked {
		return nil, errors.New("digests: asked too many at once")
	}
	out := make([]*page.Capture, len(digests))
	for i, d := range digests {
		b, err := s.store.History(lineage, digestKey(d))
		if err != nil {
			return nil, err
		}
		if b != nil {
			out[i], _ = decodeDigestEntry(b, d)
		}
	}
	return out, nil
}

package sink

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	whatwg "github.com/nlnwa/whatwg-url/url"

	"github.com/drover-crawl/drover/page"
)

// The WARC sink writes a CDXJ index beside each WARC file it closes
// (drover-....warc.gz -> drover-....cdxj): one line per response or
// revisit record, sorted, in the form pywb and the Webrecorder tools read:
//
//	com,example)/a?b=1&c=2 20261206070000 {"url":"http://example.com/a?c=2&b=1","mime":"text/html","status":"200","digest":"...","length":"412","offset":"666","filename":"drover-....warc.gz"}
//
// The line is what webrecorder's warcio indexer (`warcio cdx-index`) makes
// of the same record, field for field: the SURT key (its getSurt: "www."
// dropped, lower case, host reversed, query parameters sorted), the
// 14-digit timestamp, the Content-Type's media type (warc/revisit for a
// revisit), the status line's code, the payload digest without "sha1:" (a
// revisit's is the earlier capture's), and the gzip member's length and
// offset. A replay tool then finds a page and its subrequests without
// reading the WARC files. Lines sort as bytes (LC_ALL=C sort), as pywb's
// binary search needs.
//
// A file a crash left open has no index (its last records may be torn);
// `warcio cdx-index` or pywb's `wb-manager add` index it.

// cdxEntry is a response or revisit record's index line before its place
// in the file is known: its key and its JSON fields but offset and
// filename.
type cdxEntry struct {
	key    string // urlkey SP timestamp
	url    string
	mime   string
	status string
	digest string
	// offset is the record's offset in the page's encoded records, then
	// (once written) in the file; length is its gzip member's length.
	offset, length int64
	// file is the base name of the file the record went to, set by the
	// writer on the Store's own entry.
	file string
}

// newCDXEntry indexes p's response or revisit record, whose
// WARC-Payload-Digest is digest. A revisit's media type is warc/revisit,
// as warcio and pywb write it: the content is the earlier capture's, which
// a replay tool finds by the revisit's digest.
func newCDXEntry(p *page.Page, date, digest string) *cdxEntry {
	mime := cdxMime(p.Header)
	if p.Revisit != nil {
		mime = "warc/revisit"
	}
	return &cdxEntry{
		key:    surt(p.URL) + " " + cdxTimestamp(date),
		url:    p.URL,
		mime:   mime,
		status: cdxStatus(p),
		digest: strings.TrimPrefix(digest, "sha1:"),
	}
}

// line renders the entry's CDXJ line for file (a base name), with the
// newline.
func (e *cdxEntry) line(file string) []byte {
	fields := struct {
		URL      string `json:"url"`
		Mime     string `json:"mime,omitempty"`
		Status   string `json:"status,omitempty"`
		Digest   string `json:"digest,omitempty"`
		Length   string `json:"length"`
		Offset   string `json:"offset"`
		Filename string `json:"filename"`
	}{e.url, e.mime, e.status, e.digest, strconv.FormatInt(e.length, 10), strconv.FormatInt(e.offset, 10), file}
	var b bytes.Buffer
	b.WriteString(e.key)
	b.WriteByte(' ')
	// JSON as JavaScript's JSON.stringify writes it: no escaping of <, >, &.
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(fields) // strings only: it does not fail
	return b.Bytes()
}

// cdxTimestamp is a WARC-Date's first 14 digits.
func cdxTimestamp(date string) string {
	d := strings.NewReplacer("-", "", ":", "", "T", "").Replace(date)
	return d[:min(14, len(d))]
}

// cdxStatus is the code of p's status line as the indexer reads it from
// the record's block (a revisit's line is this fetch's: 304 for a
// server-not-modified one), or p.Status when the line has none.
func cdxStatus(p *page.Page) string {
	_, rest, _ := strings.Cut(p.StatusLine, " ")
	code, _, _ := strings.Cut(rest, " ")
	if n, err := strconv.Atoi(code); err == nil {
		return strconv.Itoa(n)
	}
	return strconv.Itoa(p.Status)
}

// cdxMime is the media type of a raw header block's Content-Type (its
// values joined as a Fetch Headers object joins them), or "".
func cdxMime(header []byte) string {
	var vals []string
	for line := range strings.SplitSeq(string(header), "\n") {
		name, val, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(strings.TrimSpace(name), "content-type") {
			vals = append(vals, strings.TrimSpace(val))
		}
	}
	mt, _, _ := strings.Cut(strings.Join(vals, ", "), ";")
	return strings.TrimSpace(mt)
}

var surtWWW = regexp.MustCompile(`^(https?://)www\d*\.`)

// surt is warcio's getSurt of an http(s) URL: "www." (and "www2.", ...)
// dropped, the URL lower-cased and parsed as a browser parses it (the
// WHATWG URL standard), the host's labels reversed and joined by commas,
// the port if not the default, ")", the path, and the query's parameters
// sorted. Another URL, or one that does not parse, is its own key.
func surt(raw string) string {
	if !strings.HasPrefix(raw, "http:") && !strings.HasPrefix(raw, "https:") {
		return raw
	}
	u, err := whatwg.Parse(strings.ToLower(surtWWW.ReplaceAllString(raw, "$1")))
	if err != nil {
		return raw
	}
	labels := strings.Split(u.Hostname(), ".")
	slices.Reverse(labels)
	var b strings.Builder
	b.WriteString(strings.Join(labels, ","))
	if p := u.Port(); p != "" {
		b.WriteString(":" + p)
	}
	b.WriteString(")" + u.Pathname())
	if q := u.Search(); q != "" {
		params := strings.Split(q[1:], "&")
		slices.Sort(params)
		b.WriteString("?" + strings.Join(params, "&"))
	}
	return b.String()
}

// cdxjPath is where the index of the WARC file at path goes.
func cdxjPath(path string) string {
	return strings.TrimSuffix(path, ".warc.gz") + ".cdxj"
}

// writeCDXJ writes the sorted index of the WARC file at path, whose
// records entries index, and fsyncs it; a temporary name and a rename
// make it whole or absent.
func writeCDXJ(path string, entries []*cdxEntry) error {
	file := filepath.Base(path)
	lines := make([][]byte, len(entries))
	for i, e := range entries {
		lines[i] = e.line(file)
	}
	slices.SortFunc(lines, bytes.Compare)
	dst := cdxjPath(path)
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("cdxj %s: %w", dst, err)
	}
	w := bufio.NewWriter(f)
	for _, l := range lines {
		_, _ = w.Write(l) // the error, if any, is Flush's
	}
	err = w.Flush()
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, dst)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("cdxj %s: %w", dst, err)
	}
	return syncDir(filepath.Dir(dst))
}

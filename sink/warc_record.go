package sink

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base32"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/page"
)

// encodedPage is a page's records, gzip members ready to append, and the
// index entry of its response or revisit (nil for a failure). A page
// whose body is spooled has its response record in big, between data (its
// request record) and tail (its metadata record).
type encodedPage struct {
	data []byte
	big  *bigRecord
	tail []byte
	idx  *cdxEntry
	// where is the page's Page.Stored: the writer adds the file and
	// offset it appends the page at.
	where *page.Locations
}

// size is the bytes the page adds to its file.
func (p encodedPage) size() int {
	n := len(p.data) + len(p.tail)
	if p.big != nil {
		n += int(p.big.size)
	}
	return n
}

// gzipWriters are reused: a gzip.Writer allocates about 800 KB.
var gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}

// recordEncoder builds gzip members, one per record, in out.
type recordEncoder struct {
	out bytes.Buffer
	hdr bytes.Buffer
	gz  *gzip.Writer
}

func newRecordEncoder() *recordEncoder {
	return &recordEncoder{gz: gzipWriters.Get().(*gzip.Writer)}
}

// done returns the encoded records and releases the gzip writer.
func (e *recordEncoder) done() []byte {
	gzipWriters.Put(e.gz)
	e.gz = nil
	return e.out.Bytes()
}

// encodePage returns p's records (request, response or revisit, metadata),
// each a gzip member; with captures, its response or revisit record alone
// (a failure keeps its metadata record, its only one). Page records carry
// no WARC-Warcinfo-ID (an optional field): the file they land in is
// chosen later, by the writer.
func encodePage(p *page.Page, captures bool) encodedPage {
	e := newRecordEncoder()
	e.out.Grow(len(p.Body)/2 + len(p.Header) + len(p.Request) + 1024)
	date, common := recordCommon(p)
	mainID := ""
	if !captures {
		mainID = e.request(p, common)
	}
	var idx *cdxEntry
	if p.Revisit != nil || p.Status != 0 {
		mainID, idx = e.capture(p, date, common, mainID)
	}
	if !captures || idx == nil {
		e.metadata(p, common, mainID)
	}
	return encodedPage{data: e.done(), idx: idx, where: p.Stored}
}

// recordCommon is the date and the fields every record of p has.
func recordCommon(p *page.Page) (string, []string) {
	date := warcDate(p.FetchedAt)
	common := []string{"WARC-Date", date, "WARC-Target-URI", p.URL}
	if p.IP != "" {
		common = append(common, "WARC-IP-Address", p.IP)
	}
	return date, common
}

// request appends p's request record, when the request is known, and
// returns its ID ("" without one).
func (e *recordEncoder) request(p *page.Page, common []string) string {
	if len(p.Request) == 0 {
		return ""
	}
	id := newRecordID()
	h := append([]string{"WARC-Type", "request", "WARC-Record-ID", id}, common...)
	h = append(h, "Content-Type", "application/http;msgtype=request")
	e.record(h, nil, withBlankLine(p.Request))
	return id
}

// capture appends p's response record, or its revisit record when p is a
// revisit, concurrent to requestID when there is one, and returns its ID
// and index entry. A revisit's block is the status line and header of this
// fetch, with no body; its payload, and so its WARC-Payload-Digest, is the
// earlier capture's (WARC 1.1, 6.7).
func (e *recordEncoder) capture(p *page.Page, date string, common []string, requestID string) (string, *cdxEntry) {
	id := newRecordID()
	typ := "response"
	if p.Revisit != nil {
		typ = "revisit"
	}
	h := append([]string{"WARC-Type", typ, "WARC-Record-ID", id}, common...)
	if requestID != "" {
		h = append(h, "WARC-Concurrent-To", requestID)
	}
	body, digest := p.Body, ""
	if p.Revisit != nil {
		h = append(h, revisitFields(p.Revisit)...)
		body, digest = nil, p.Revisit.Digest
	} else {
		if p.Truncated {
			h = append(h, "WARC-Truncated", "length")
		}
		digest = page.PayloadDigest(p.Body)
	}
	h = append(h, "WARC-Payload-Digest", digest, "Content-Type", "application/http;msgtype=response")
	idx := newCDXEntry(p, date, digest)
	idx.offset = int64(e.out.Len())
	e.record(h, httpHead(p), body)
	idx.length = int64(e.out.Len()) - idx.offset
	return id, idx
}

// revisitProfileURI prefixes a page.Revisit profile to make its WARC-Profile
// (WARC 1.1, 6.7.2 and 6.7.3).
const revisitProfileURI = "http://netpreserve.org/warc/1.1/revisit/"

// revisitFields are the WARC fields that make a response record a revisit
// of the earlier capture r names (WARC 1.1, 6.7): its profile, WARC-Truncated
// for an identical-payload-digest one, and the WARC-Target-URI and
// WARC-Date of that capture's response record, by which pywb and
// ReplayWeb.page find it. A date or URI r lacks is left out rather
// than made up (warcDate would write the time of writing).
func revisitFields(r *page.Revisit) []string {
	h := []string{"WARC-Profile", revisitProfileURI + r.Profile}
	if r.Profile == page.RevisitIdenticalDigest {
		// The block is a 200 with its body cut off, which 6.7.2 has
		// said with WARC-Truncated. A 304's block is its whole response.
		h = append(h, "WARC-Truncated", "length")
	}
	if r.RefersToURI != "" {
		h = append(h, "WARC-Refers-To-Target-URI", r.RefersToURI)
	}
	if !r.RefersToDate.IsZero() {
		h = append(h, "WARC-Refers-To-Date", warcDate(r.RefersToDate))
	}
	return h
}

// httpHead is p's HTTP status line and header block, with the blank line
// that ends it.
func httpHead(p *page.Page) []byte {
	head := make([]byte, 0, len(p.StatusLine)+len(p.Header)+4)
	head = append(head, p.StatusLine...)
	head = append(head, "\r\n"...)
	return append(head, withBlankLine(p.Header)...)
}

// metadata appends p's metadata record, concurrent to mainID when there is
// one: what WARC has no field for.
func (e *recordEncoder) metadata(p *page.Page, common []string, mainID string) {
	var meta strings.Builder
	fmt.Fprintf(&meta, "campaign: %s\r\ndepth: %d\r\n", oneLine(p.Campaign), p.Depth)
	if p.Parent != "" {
		fmt.Fprintf(&meta, "via: %s\r\n", oneLine(p.Parent))
	}
	if p.Err != "" {
		fmt.Fprintf(&meta, "fetch-error: %s\r\n", oneLine(p.Err))
	}
	h := append([]string{"WARC-Type", "metadata", "WARC-Record-ID", newRecordID()}, common...)
	if mainID != "" {
		h = append(h, "WARC-Concurrent-To", mainID)
	}
	h = append(h, "Content-Type", "application/warc-fields")
	e.record(h, nil, []byte(meta.String()))
}

// record appends one gzip member: the WARC header fields (name, value
// pairs), WARC-Block-Digest and Content-Length of head+body, the block,
// CRLF CRLF. Writes to a bytes.Buffer do not fail.
func (e *recordEncoder) record(fields []string, head, body []byte) {
	d := sha1.New()
	d.Write(head)
	d.Write(body)
	e.header(fields, d.Sum(nil), int64(len(head)+len(body)))
	e.gz.Reset(&e.out)
	_, _ = e.gz.Write(e.hdr.Bytes())
	_, _ = e.gz.Write(head)
	_, _ = e.gz.Write(body)
	_, _ = e.gz.Write([]byte("\r\n\r\n"))
	_ = e.gz.Close()
}

// header sets e.hdr to a record's header: fields (name, value pairs),
// WARC-Block-Digest (the block's SHA-1) and Content-Length.
func (e *recordEncoder) header(fields []string, blockSHA1 []byte, length int64) {
	e.hdr.Reset()
	e.hdr.WriteString("WARC/1.1\r\n")
	for i := 0; i < len(fields); i += 2 {
		e.hdr.WriteString(fields[i] + ": " + oneLine(fields[i+1]) + "\r\n")
	}
	e.hdr.WriteString("WARC-Block-Digest: sha1:" + base32.StdEncoding.EncodeToString(blockSHA1) + "\r\n")
	e.hdr.WriteString("Content-Length: " + strconv.FormatInt(length, 10) + "\r\n\r\n")
}

// withBlankLine ends a raw header block with the empty line that closes it
// on the wire, unless it already does. Page.Header is documented as the
// header lines alone.
func withBlankLine(b []byte) []byte {
	if bytes.HasSuffix(b, []byte("\r\n\r\n")) || (len(b) == 2 && string(b) == "\r\n") {
		return b
	}
	out := make([]byte, 0, len(b)+4)
	out = append(out, b...)
	if len(b) > 0 && !bytes.HasSuffix(b, []byte("\r\n")) {
		out = append(out, "\r\n"...)
	}
	return append(out, "\r\n"...)
}

func warcDate(t time.Time) string {
	if t.IsZero() {
		t = time.Now()
	}
	return t.UTC().Format("2006-01-02T15:04:05.999999999Z")
}

// newRecordID returns a random (version 4) UUID URN in angle brackets.
func newRecordID() string {
	var u [16]byte
	_, _ = rand.Read(u[:]) // crypto/rand.Read never fails on supported platforms
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("<urn:uuid:%x-%x-%x-%x-%x>", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
}

// oneLine keeps a value from breaking out of its header line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
}

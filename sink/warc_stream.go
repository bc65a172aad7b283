package sink

import (
	"bufio"
	"crypto/sha1"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/drover-crawl/drover/page"
)

// bigRecord is a spooled page's response record, one gzip member in an
// unlinked temporary file. Its Store and the writer each hold a
// reference; the last release closes the file, so that a Store giving up
// (its ctx ended) never pulls the file from under the writer, and a
// record never handed over is not kept.
type bigRecord struct {
	f    *os.File
	size int64
	// path is the file's name when it could not be unlinked while open
	// (Windows): removed at the last release.
	path string

	mu   sync.Mutex
	refs int
}

// acquire takes a reference; false when the record is already released.
func (b *bigRecord) acquire() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.refs == 0 {
		return false
	}
	b.refs++
	return true
}

func (b *bigRecord) release() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refs--
	if b.refs == 0 {
		_ = b.f.Close()
		if b.path != "" {
			_ = os.Remove(b.path)
		}
	}
}

// countWriter counts what goes through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// encodeSpooled is encodePage for a page whose body is spooled (a
// response, not a revisit): the request and metadata records in memory,
// the response record streamed from the spool into a temporary file in
// tmpDir (the WARC sink's directory: the disk the record is bound for),
// unlinked at once. The spool is read twice, once for the
// WARC-Block-Digest, which the header carries before the block, and once
// to compress it; its payload digest was computed as it was spooled.
func encodeSpooled(p *page.Page, tmpDir string, captures bool) (encodedPage, error) {
	e := newRecordEncoder()
	date, common := recordCommon(p)
	reqID := ""
	if !captures {
		reqID = e.request(p, common)
	}
	data := append([]byte(nil), e.out.Bytes()...)
	e.out.Reset()
	big, id, idx, err := e.streamResponse(p, date, common, reqID, tmpDir)
	if err != nil {
		e.done()
		return encodedPage{}, err
	}
	if !captures {
		e.metadata(p, common, id)
	}
	idx.offset, idx.length = int64(len(data)), big.size
	return encodedPage{data: data, big: big, tail: e.done(), idx: idx, where: p.Stored}, nil
}

// streamResponse writes p's response record, its body read from the
// spool, to a new unlinked temporary file, and returns it with the
// record's ID and index entry. A body cut by the campaign's cap says
// WARC-Truncated: length (WARC 1.1, 5.13: the configured maximum length).
func (e *recordEncoder) streamResponse(p *page.Page, date string, common []string, requestID, tmpDir string) (*bigRecord, string, *cdxEntry, error) {
	id := newRecordID()
	h := append([]string{"WARC-Type", "response", "WARC-Record-ID", id}, common...)
	if requestID != "" {
		h = append(h, "WARC-Concurrent-To", requestID)
	}
	if p.Truncated {
		h = append(h, "WARC-Truncated", "length")
	}
	digest := p.BodyDigest()
	h = append(h, "WARC-Payload-Digest", digest, "Content-Type", "application/http;msgtype=response")
	head := httpHead(p)
	d := sha1.New()
	d.Write(head)
	if _, err := io.Copy(d, p.BodyReader()); err != nil {
		return nil, "", nil, fmt.Errorf("reading the spooled body: %w", err)
	}
	e.header(h, d.Sum(nil), int64(len(head))+p.BodySize())

	f, err := os.CreateTemp(tmpDir, "drover-record-*")
	if err != nil {
		return nil, "", nil, fmt.Errorf("record file: %w (set TMPDIR to a directory with room for the largest body)", err)
	}
	big := &bigRecord{f: f, refs: 1}
	if os.Remove(f.Name()) != nil {
		big.path = f.Name()
	}
	if err := e.compress(f, head, p.BodyReader(), &big.size); err != nil {
		big.release()
		return nil, "", nil, err
	}
	return big, id, newCDXEntry(p, date, digest), nil
}

// compress writes one gzip member to f: e.hdr, head, body, CRLF CRLF;
// *n is set to the member's length.
func (e *recordEncoder) compress(f *os.File, head []byte, body io.Reader, n *int64) error {
	bw := bufio.NewWriterSize(f, 256<<10)
	cw := &countWriter{w: bw}
	e.gz.Reset(cw)
	_, _ = e.gz.Write(e.hdr.Bytes())
	_, _ = e.gz.Write(head)
	if _, err := io.Copy(e.gz, body); err != nil {
		return fmt.Errorf("compressing the spooled body: %w", err)
	}
	_, _ = e.gz.Write([]byte("\r\n\r\n"))
	if err := e.gz.Close(); err != nil {
		return fmt.Errorf("record file: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("record file: %w", err)
	}
	*n = cw.n
	return nil
}

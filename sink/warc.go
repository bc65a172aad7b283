package sink

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/sink/sinkuri"
)

// WARCConfig configures a WARC sink. Zero values take the defaults.
type WARCConfig struct {
	// Dir receives the files; it is created if missing.
	Dir string
	// Campaign goes into the file names and the warcinfo record.
	Campaign string
	// MaxFileSize rotates a file once it holds this many bytes (default 1 GB).
	// A file may exceed it by one page's records.
	MaxFileSize int64
	// MaxBatch is the most pages written per fsync (default 256).
	MaxBatch int
	// Captures writes a page's response or revisit record alone, without
	// its request and metadata records (warc:DIR?records=captures, as
	// Heritrix's writeRequests and writeMetadata off): a recrawl's revisits
	// cost a third of their bytes. A failure keeps its metadata record.
	Captures bool
	// Log says when a file's CDXJ index could not be written (nil:
	// slog.Default()); the pages are stored all the same.
	Log *slog.Logger
}

// WARC is a Sink writing WARC/1.1 files, each record its own gzip member
// (.warc.gz), named drover-<campaign>-<UTC timestamp>-<seq>.warc.gz. Every
// file opens with a warcinfo record. A page becomes:
//
//   - a request record (Page.Request), when the request is known;
//   - a response record: StatusLine CRLF, Header, CRLF, Body, exactly as
//     given; WARC-Payload-Digest is the SHA-1 of Body, WARC-Block-Digest of
//     the whole block, both "sha1:" + base32, as is customary;
//   - a metadata record (application/warc-fields) with what WARC has no field
//     for: campaign, depth, via (the parent URL), and fetch-error.
//
// A revisit (Page.Revisit: the content was found unchanged since an earlier
// capture) has a revisit record (WARC 1.1, 6.7) in place of its response:
// WARC-Profile .../warc/1.1/revisit/server-not-modified or
// .../identical-payload-digest, WARC-Refers-To-Target-URI and
// WARC-Refers-To-Date naming the earlier capture's response record (its
// WARC-Target-URI and WARC-Date), WARC-Payload-Digest the earlier
// capture's, and a block of this fetch's StatusLine CRLF, Header, CRLF:
// no body. An identical-payload-digest revisit says WARC-Truncated: length
// (its block is a 200 without its body, 6.7.2); a server-not-modified one
// does not (a 304 has no body). Replay tools (pywb, ReplayWeb.page) find
// the earlier capture by these fields.
//
// A permanent failure (Status 0) has no response: it is the metadata record
// alone, with its fetch-error field. Metadata rather than resource, because a
// resource record claims to hold the resource itself, and a failure has none.
// All of a page's records are linked by WARC-Concurrent-To.
//
// Records are written by hand rather than with gowarc's WarcFileWriter:
// that writer fsyncs per record or never (no group commit, and its file is
// not exposed to sync a batch), and its record builder parses and validates
// the HTTP block, which must not stand between a server's bytes (malformed
// or not) and the archive. gowarc reads these files in the tests.
//
// Durability: Store returns once the page's records are written and the file
// fsynced; concurrent Stores share one fsync (group commit). A new file's
// directory entry is fsynced before it is used. After a failed write the
// file is truncated to its last fsync and a new file is started.
//
// Caveat: Body has chunked transfer coding removed while Header is raw, so a
// response block may say "Transfer-Encoding: chunked" over an unchunked
// body; WARC readers that de-chunk (warcio does) fall back to the bytes as
// they are when they do not parse as chunks.
type WARC struct {
	cfg WARCConfig
	b   *batcher[encodedPage]

	// Owned by the batcher's single worker.
	cur *warcFile
	seq int

	// create makes a new file (createWARCFile); the seam through which
	// tests count fsyncs and inject write, flush and fsync faults. Set it
	// before the first Store.
	create func(path string) (warcOSFile, error)

	mu     sync.Mutex // guards closed
	closed bool
}

// warcOSFile is what the writer needs of a file; *os.File is one.
type warcOSFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Close() error
}

// createWARCFile creates path, never overwriting another writer's file.
func createWARCFile(path string) (warcOSFile, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
}

type warcFile struct {
	f      warcOSFile
	w      *bufio.Writer
	name   string
	size   int64 // bytes handed to w
	synced int64 // size at the last fsync: whole pages, all on disk
	// index: the file's response and revisit records, for its CDXJ
	// (cdxj.go).
	index []*cdxEntry
}

// NewWARC creates cfg.Dir if needed and returns the sink; the first file is
// created by the first Store.
func NewWARC(cfg WARCConfig) (*WARC, error) {
	if cfg.Dir == "" {
		return nil, errors.New("warc sink: Dir is required")
	}
	cfg.MaxFileSize = positiveOr(cfg.MaxFileSize, 1<<30)
	cfg.MaxBatch = positiveOr(cfg.MaxBatch, 256)
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("warc sink: %w", err)
	}
	w := &WARC{cfg: cfg, create: createWARCFile}
	w.b = newBatcher(1, cfg.MaxBatch, encodedPage.size, w.flush)
	return w, nil
}

// Store writes p's records and returns nil once they are fsynced. When ctx
// ends first the page may still be written (a duplicate on retry). p must not
// be modified after the call.
//
// The records are built and compressed in the caller's goroutine, so that
// compression runs on every core; the writer only appends and fsyncs.
//
// A spooled body (p.BodyFile) is streamed: its response record is
// compressed from the spool into a temporary file, which the writer
// copies into the WARC file, so that no body is ever whole in memory. On
// success p.WARC is set to the response record's place.
func (w *WARC) Store(ctx context.Context, p *page.Page) error {
	var ep encodedPage
	if p.BodyFile != nil && p.Revisit == nil && p.Status != 0 {
		var err error
		if ep, err = encodeSpooled(p, w.cfg.Dir, w.cfg.Captures); err != nil {
			return fmt.Errorf("warc %s: store %s: %w", w.cfg.Dir, p.URL, err)
		}
		defer ep.big.release()
	} else {
		ep = encodePage(p, w.cfg.Captures)
	}
	if err := w.b.store(ctx, ep); err != nil {
		return fmt.Errorf("warc %s: store %s: %w", w.cfg.Dir, p.URL, err)
	}
	if ep.idx != nil && ep.idx.file != "" {
		// A campaign may write two WARC sinks (full records and captures),
		// which Multi stores at once: either's record serves.
		pageWARCMu.Lock()
		p.WARC = &page.WARCLocation{File: ep.idx.file, Offset: ep.idx.offset}
		pageWARCMu.Unlock()
	}
	return nil
}

// pageWARCMu guards page.Page.WARC, which every WARC sink of a campaign
// sets. Its readers (the Kafka and PostgreSQL sinks' pointer records) read
// it only after the WARC sinks returned (Multi.Store).
var pageWARCMu sync.Mutex

func (w *WARC) placesBody() bool { return true }

// Close syncs and closes the current file.
func (w *WARC) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.b.close()
	return w.finish()
}

func (w *WARC) flush(_ int, pages []encodedPage) []error {
	err := w.writeBatch(pages)
	if err != nil {
		w.abandon()
		return allErr(len(pages), err)
	}
	return nil
}

// writeBatch appends each page's encoded records, rotating between pages,
// and fsyncs once.
func (w *WARC) writeBatch(pages []encodedPage) error {
	for _, p := range pages {
		if p.big != nil {
			if !p.big.acquire() {
				continue // its Store gave up and released it: nothing waits for it
			}
			defer p.big.release()
		}
		if w.cur != nil && w.cur.size >= w.cfg.MaxFileSize {
			if err := w.finish(); err != nil {
				return err
			}
		}
		if w.cur == nil {
			if err := w.open(); err != nil {
				return err
			}
		}
		loc := page.Location{Kind: sinkuri.WARC.Name, File: w.cur.name, Offset: w.cur.size, Length: int64(p.size())}
		if p.idx != nil {
			e := *p.idx
			e.offset += w.cur.size
			w.cur.index = append(w.cur.index, &e)
			// The Store waiting for this batch reads it once the batch
			// is durable: where its record went.
			p.idx.file, p.idx.offset = filepath.Base(w.cur.name), e.offset
			loc.Offset, loc.Length = e.offset, e.length
		}
		p.where.Add(loc)
		if err := w.writePage(p); err != nil {
			return err
		}
	}
	if w.cur == nil {
		return nil // every page was one whose Store gave up: nothing written
	}
	if err := w.cur.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", w.cur.name, err)
	}
	if err := w.cur.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", w.cur.name, err)
	}
	w.cur.synced = w.cur.size
	return nil
}

// open creates the next file (O_EXCL: never overwrite another writer's file)
// and writes its warcinfo record.
func (w *WARC) open() error {
	camp := sanitizeName(w.cfg.Campaign)
	for {
		w.seq++
		name := fmt.Sprintf("drover-%s-%s-%05d.warc.gz", camp, time.Now().UTC().Format("20060102150405"), w.seq)
		path := filepath.Join(w.cfg.Dir, name)
		f, err := w.create(path)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
		if err := syncDir(w.cfg.Dir); err != nil {
			f.Close()
			return err
		}
		w.cur = &warcFile{f: f, w: bufio.NewWriterSize(f, 1<<20), name: path}
		info := fmt.Sprintf("software: drover\r\nformat: WARC File Format 1.1\r\nconformsTo: https://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/\r\nisPartOf: %s\r\n", w.cfg.Campaign)
		e := newRecordEncoder()
		e.record([]string{
			"WARC-Type", "warcinfo",
			"WARC-Record-ID", newRecordID(),
			"WARC-Date", warcDate(time.Now()),
			"WARC-Filename", name,
			"Content-Type", "application/warc-fields",
		}, nil, []byte(info))
		return w.write(e.done())
	}
}

// writePage appends one page's records.
func (w *WARC) writePage(p encodedPage) error {
	if err := w.write(p.data); err != nil {
		return err
	}
	if p.big == nil {
		return nil
	}
	n, err := io.Copy(w.cur.w, io.NewSectionReader(p.big.f, 0, p.big.size))
	w.cur.size += n
	if err != nil {
		return fmt.Errorf("write %s: %w", w.cur.name, err)
	}
	return w.write(p.tail)
}

func (w *WARC) write(data []byte) error {
	n, err := w.cur.w.Write(data)
	w.cur.size += int64(n)
	if err != nil {
		return fmt.Errorf("write %s: %w", w.cur.name, err)
	}
	return nil
}

// finish flushes, fsyncs and closes the current file.
func (w *WARC) finish() error {
	if w.cur == nil {
		return nil
	}
	c := w.cur
	w.cur = nil
	err := c.w.Flush()
	if err == nil {
		err = c.f.Sync()
	}
	if cerr := c.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("close %s: %w", c.name, err)
	}
	// The index is rebuilt from the file at will: failing to write it
	// fails no Store (its pages are on disk), it is told.
	if err := writeCDXJ(c.name, c.index); err != nil {
		w.log().Error("WARC index not written; the WARC file is whole (index it with `warcio cdx-index` or pywb)", "file", c.name, "err", err)
	}
	return nil
}

func (w *WARC) log() *slog.Logger {
	if w.cfg.Log != nil {
		return w.cfg.Log
	}
	return slog.Default()
}

// abandon drops the current file after a failed write: the failed batch is
// cut off (best effort) so that the file ends with a whole record, and the
// next batch starts a new file. The batch's Stores all fail, so nothing
// acknowledged is cut.
func (w *WARC) abandon() {
	if w.cur == nil {
		return
	}
	c := w.cur
	w.cur = nil
	if c.synced == 0 {
		_ = c.f.Close()
		_ = os.Remove(c.name)
		return
	}
	if c.f.Truncate(c.synced) == nil && c.f.Sync() == nil {
		// The file holds its records up to the last fsync: index those.
		kept := c.index[:0]
		for _, e := range c.index {
			if e.offset+e.length <= c.synced {
				kept = append(kept, e)
			}
		}
		if err := writeCDXJ(c.name, kept); err != nil {
			w.log().Error("WARC index not written; the WARC file is whole (index it with `warcio cdx-index` or pywb)", "file", c.name, "err", err)
		}
	}
	_ = c.f.Close()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}

func sanitizeName(s string) string {
	if s == "" {
		return "default"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

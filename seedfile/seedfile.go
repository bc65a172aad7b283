// Package seedfile reads a list of seeds, one URL a line, from a file
// (plain or gzip), standard input or an http(s) URL, and streams it to the
// schedulers in batches. The starter (`start --seeds-file`, `seed --file`)
// and the SeedFile activity (the workflow's "seed" Update) both use it, so
// that a million seeds never ride in a workflow's input or history.
//
// A stream is idempotent: a scheduler skips the seeds already queued in the
// run (its seen store's marks), so sending a batch twice, or the whole
// list again after a crash, queues each seed once and counts it once.
package seedfile

import (
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/urlrule"
)

// DefaultBatch is how many seeds go to a scheduler in one request.
const DefaultBatch = 2000

// maxExamples bounds the refused lines a stream lists (Counts.Examples).
const maxExamples = 10

// maxLine bounds one line of a seed list; a longer line ends the stream
// with an error (it is no seed list). A URL is at most
// urlrule.MaxURLLength bytes; a longer one is refused as a seed.
const maxLine = 1 << 20

// sendTries bounds the attempts at one batch; a batch is idempotent.
const sendTries = 3

// ErrTooManyHosts: the seeds are on more hosts than Options.MaxHosts.
var ErrTooManyHosts = errors.New("too many hosts")

// Counts say what a stream did. Every line is counted once: blank,
// seeded, known, invalid or refused.
type Counts struct {
	// Lines is the lines read, blank and comment lines included.
	Lines int64 `json:"lines"`
	// Blank is the empty lines and the comments (lines starting with #).
	Blank int64 `json:"blank,omitempty"`
	// Seeded is the seeds queued by this stream.
	Seeded int64 `json:"seeded"`
	// Known is the seeds already queued in this run (an earlier stream, a
	// batch sent again, or a line seen twice), not queued again.
	Known int64 `json:"known"`
	// Invalid is the lines that are no http(s) URL.
	Invalid int64 `json:"invalid,omitempty"`
	// Refused is the seeds the campaign's scope refuses: out of scope (a
	// host neither among the seeds' hosts nor matched by scope or an
	// include), excluded, or a trap.
	Refused int64 `json:"refused,omitempty"`
	// Examples are the first invalid or refused lines, "line N: URL: why".
	Examples []string `json:"examples,omitempty"`
}

// Add adds o's counts to c (Examples up to their bound).
func (c *Counts) Add(o Counts) {
	c.Lines += o.Lines
	c.Blank += o.Blank
	c.Seeded += o.Seeded
	c.Known += o.Known
	c.Invalid += o.Invalid
	c.Refused += o.Refused
	for _, e := range o.Examples {
		if len(c.Examples) < maxExamples {
			c.Examples = append(c.Examples, e)
		}
	}
}

// Send queues one batch of normalized seeds and returns how many of them
// were new (not queued in the run before).
type Send func(ctx context.Context, urls []string) (int, error)

// Options tune Stream.
type Options struct {
	// Batch is the seeds a Send carries; 0 means DefaultBatch.
	Batch int
	// From are the counts of a previous attempt (its last Progress): its
	// lines are read and not sent again, and its counts carried on (a
	// resumed activity).
	From Counts
	// DropParams normalize the seeds as the campaign does.
	DropParams []string
	// Scope, when set, refuses the seeds it does not allow; nil sends
	// every valid seed (at start, the seeds make the scope).
	Scope *urlrule.Scope
	// Hosts, when set, collects the host of every seed sent; the stream
	// fails with ErrTooManyHosts once it holds more than MaxHosts.
	Hosts    map[string]bool
	MaxHosts int
	// Progress is called after each batch, with the counts so far.
	Progress func(Counts)
	// Backoff is the wait before a failed batch's second try, doubled
	// before its third; 0 means a second.
	Backoff time.Duration
}

// Stream reads r, one seed a line, and sends the seeds in batches. Invalid
// and refused lines are counted and the first listed, never sent; it
// returns the counts and the first error that stopped it (a Send failing
// sendTries times, a read error, ErrTooManyHosts, ctx done).
func Stream(ctx context.Context, r io.Reader, o Options, send Send) (Counts, error) {
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	s := &stream{o: o, send: send, batch: make([]string, 0, o.Batch), inBatch: map[string]bool{}, c: o.From}
	s.c.Examples = slices.Clone(o.From.Examples)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for n := int64(1); sc.Scan(); n++ {
		if n <= o.From.Lines {
			continue
		}
		s.c.Lines++
		if err := s.line(ctx, sc.Text()); err != nil {
			return s.c, err
		}
	}
	if err := sc.Err(); err != nil {
		return s.c, fmt.Errorf("reading line %d: %w", s.c.Lines+1, err)
	}
	return s.c, s.flush(ctx)
}

type stream struct {
	o       Options
	send    Send
	c       Counts
	batch   []string
	inBatch map[string]bool
}

func (s *stream) line(ctx context.Context, text string) error {
	raw := strings.TrimSpace(text)
	if raw == "" || strings.HasPrefix(raw, "#") {
		s.c.Blank++
		return nil
	}
	u, err := urlrule.Normalize(raw, nil, s.o.DropParams)
	if err == nil {
		_, err = urlrule.HostKey(u)
	}
	if err != nil {
		s.c.Invalid++
		s.example(raw, err.Error())
		return nil
	}
	if s.o.Scope != nil {
		if ok, why := s.o.Scope.AllowNormal(u, 0, nil); !ok {
			s.c.Refused++
			s.example(raw, why)
			return nil
		}
	}
	if s.o.Hosts != nil {
		h, _ := urlrule.HostKey(u)
		if s.o.Hosts[h] = true; len(s.o.Hosts) > s.o.MaxHosts {
			return fmt.Errorf("line %d: the seeds are on more than %d hosts: %w", s.c.Lines, s.o.MaxHosts, ErrTooManyHosts)
		}
	}
	if s.inBatch[u] {
		s.c.Known++ // a line seen twice in one batch: the scheduler would queue both
		return nil
	}
	s.inBatch[u] = true
	s.batch = append(s.batch, u)
	if len(s.batch) >= s.o.Batch {
		return s.flush(ctx)
	}
	return nil
}

func (s *stream) example(raw, why string) {
	if len(s.c.Examples) < maxExamples {
		if len(raw) > 200 {
			raw = raw[:200] + "..."
		}
		s.c.Examples = append(s.c.Examples, fmt.Sprintf("line %d: %s: %s", s.c.Lines, raw, why))
	}
}

// flush sends the batch, trying again after a failure (a batch is
// idempotent), at most sendTries times.
func (s *stream) flush(ctx context.Context) error {
	if len(s.batch) == 0 {
		return nil
	}
	var err error
	for try := range sendTries {
		if try > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(try) * s.o.Backoff):
			}
		}
		var n int
		if n, err = s.send(ctx, s.batch); err == nil {
			s.c.Seeded += int64(n)
			s.c.Known += int64(len(s.batch) - n)
			s.batch = s.batch[:0]
			clear(s.inBatch)
			if s.o.Progress != nil {
				s.o.Progress(s.c)
			}
			return nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("sending seeds up to line %d: %w", s.c.Lines, err)
}

// Open opens a seed list: "-" is stdin, an http(s) URL is fetched (with
// ctx), anything else is a path. A gzip stream (by its magic bytes, not
// its name) is decompressed.
func Open(ctx context.Context, src string, stdin io.Reader) (io.ReadCloser, error) {
	var rc io.ReadCloser
	switch {
	case src == "":
		return nil, errors.New("no seed list named: give a path, - (standard input) or an http(s) URL")
	case src == "-":
		rc = io.NopCloser(stdin)
	case strings.HasPrefix(src, "http://") || strings.HasPrefix(src, "https://"):
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, src, nil)
		if err != nil {
			return nil, fmt.Errorf("seed list %s: %w", src, err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("seed list %s: %w", src, err)
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("seed list %s: HTTP %s", src, resp.Status)
		}
		rc = resp.Body
	default:
		f, err := os.Open(src)
		if err != nil {
			return nil, fmt.Errorf("seed list: %w", err)
		}
		rc = f
	}
	return gunzip(rc, src)
}

// gunzip returns rc, decompressed when it starts with gzip's magic bytes.
func gunzip(rc io.ReadCloser, src string) (io.ReadCloser, error) {
	br := bufio.NewReaderSize(rc, 64<<10)
	magic, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		rc.Close()
		return nil, fmt.Errorf("seed list %s: %w", src, err)
	}
	if len(magic) < 2 || magic[0] != 0x1f || magic[1] != 0x8b {
		return readCloser{br, rc}, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		rc.Close()
		return nil, fmt.Errorf("seed list %s: gzip: %w", src, err)
	}
	return readCloser{zr, rc}, nil
}

type readCloser struct {
	io.Reader
	c io.Closer
}

func (r readCloser) Close() error { return r.c.Close() }

// Control is what a Seeder needs of a scheduler's control session
// (session.Control).
type Control interface {
	// AddSeeds queues seeds of a running campaign (session.OpSeed, Live).
	AddSeeds(ctx context.Context, cfg campaign.Config, urls []string) (int, error)
	Close() error
}

// Seeder sends batches of seeds of the campaign Config (its run named:
// Config.FrontierKey) to the first scheduler of Addrs that answers, over
// one control session, dialed again after a failure. Its Send is a Send.
type Seeder struct {
	Config campaign.Config
	Addrs  []string
	Dial   func(ctx context.Context, addr string) (Control, error)
	c      Control
}

// Send queues urls on a scheduler and returns how many were new.
func (s *Seeder) Send(ctx context.Context, urls []string) (int, error) {
	if s.c == nil {
		var errs []error
		for _, addr := range s.Addrs {
			c, err := s.Dial(ctx, addr)
			if err == nil {
				s.c = c
				break
			}
			errs = append(errs, err)
		}
		if s.c == nil {
			return 0, fmt.Errorf("no scheduler reachable: %w", errors.Join(errs...))
		}
	}
	n, err := s.c.AddSeeds(ctx, s.Config, urls)
	if err != nil {
		s.Close()
	}
	return n, err
}

// Close closes the control session, if one is open.
func (s *Seeder) Close() {
	if s.c != nil {
		s.c.Close()
		s.c = nil
	}
}

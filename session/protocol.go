// Package session is the protocol between a fetcher and a scheduler, and
// its client: the frames, their codec, the messages both ends exchange
// (leases, outcomes, control requests, stats, failure records), and the
// fetcher's and the operator's side of a session (Session, Control, and
// the calls over every scheduler). The scheduler's side, the server, is
// package frontier, which imports this one; this one never imports it, so
// that a fetcher or the starter does not link the scheduler.
package session

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	fastjson "github.com/segmentio/encoding/json"

	"github.com/drover-crawl/drover/campaign"
	"github.com/drover-crawl/drover/page"
	"github.com/drover-crawl/drover/urlrule"
)

// The session protocol between a FetchSession (client) and a scheduler
// (server), over one long-lived TCP connection.
//
// A frame is a 4-byte big-endian length n, then n bytes: one byte of frame
// type and a JSON payload. JSON keeps the protocol debuggable with tcpdump;
// a frame carries a batch (leases, outcomes), so its cost is per batch.
//
//	client                          scheduler
//	Hello{version, token, role} ──▶
//	                            ◀── Welcome{version} | Refused{reason}
//	Credit{n}                   ──▶                    (fetcher role)
//	                            ◀── Leases{[...]}
//	Outcomes{[...]}             ──▶
//	Ping                        ──▶ (keepalive; renews the session's leases)
//	                            ◀── Pong
//	                            ◀── End  (the campaign ended this session)
//
// A control session (role "control") sends requests (Seed, StatsRequest,
// CloseCampaign) and receives one Reply per request, in order.
//
// The server refuses a wrong token, an unknown version and a malformed or
// oversized frame with a Refused frame saying why, then closes.

// ProtocolVersion is the version this build speaks. A server accepts
// exactly the versions it knows; a mismatch is refused with a clear reason.
const ProtocolVersion = 1

// MaxFrame bounds one frame; a larger length prefix is a protocol error (a
// page with 10,000 links of 2 KB each still fits).
const MaxFrame = 32 << 20

// DevToken is the documented token used when DROVER_TOKEN is unset; a
// scheduler listening on a non-loopback address refuses to start with it.
const DevToken = "drover-dev-token"

// FrameType tags a frame.
type FrameType byte

// Frame types.
const (
	FrameHello FrameType = iota + 1
	FrameWelcome
	FrameRefused
	FrameCredit
	FrameLeases
	FrameOutcomes
	_ // reserved (was acks)
	FramePing
	FramePong
	FrameRequest
	FrameReply
	// FrameEnd tells a fetcher session that its campaign ended it (pause,
	// stop, scale-down, restart: OpEnd named its Key): take no more
	// leases, report what is in flight, give the rest back and close.
	FrameEnd
	// FrameRecorded tells a fetcher session which of its outcomes were
	// recorded (their links published and marked queued), when its hello
	// asked (Hello.Recorded): the links they carried are known from then on
	// (KnownLinks).
	FrameRecorded
	// FrameRules gives a fetcher session its campaign's live rules
	// (campaign.Rules) when they are newer than those it started with,
	// when its hello asked (Hello.Rules): a live include widens its scope
	// without a new session.
	FrameRules
)

func (t FrameType) String() string {
	names := [...]string{"?", "hello", "welcome", "refused", "credit", "leases", "outcomes", "reserved", "ping", "pong", "request", "reply", "end", "recorded", "rules"}
	if int(t) < len(names) {
		return names[t]
	}
	return fmt.Sprintf("frame(%d)", byte(t))
}

// Roles of a session.
const (
	RoleFetcher = "fetcher"
	RoleControl = "control"
)

// Hello opens a session.
type Hello struct {
	Version int    `json:"version"`
	Token   string `json:"token"`
	Role    string `json:"role"`
	// Client names the peer in logs and stats (worker identity, fetcher index).
	Client string `json:"client"`
	// Campaign is the campaign a fetcher session works for; the first
	// session of a campaign opens it on this scheduler.
	Campaign *campaign.Config `json:"campaign,omitempty"`
	// Key names a fetcher session for OpEnd, unique within the campaign
	// (the workflow run and the FetchSession's activity ID): the campaign
	// ends its sessions by key through the scheduler, at once, instead of
	// waiting for the cancellation to reach them on a heartbeat response.
	// A key once ended is refused (Refused.Ended).
	Key string `json:"key,omitempty"`
	// Recorded asks for FrameRecorded: the fetcher keeps the links of
	// recorded outcomes out of its next ones (KnownLinks). A scheduler that
	// does not know the field ignores it, and says so by leaving
	// Welcome.Recorded unset.
	Recorded bool `json:"recorded,omitempty"`
	// Resolve: the fetcher takes KindResolve leases and reports the IP it
	// dialed (Outcome.IP). A campaign keyed by IP resolves a new host
	// first, so that its robots.txt is on the IP's clock too.
	Resolve bool `json:"resolve,omitempty"`
	// Rules asks for FrameRules: the fetcher takes newer live rules while
	// its session runs. A scheduler that does not know the field ignores
	// it, leaves Welcome.Rules unset, and says in its OpRules reply that
	// its sessions need new ones (Reply.Pushed).
	Rules bool `json:"rules,omitempty"`
}

// Welcome accepts a session.
type Welcome struct {
	Version   int           `json:"version"`
	Scheduler string        `json:"scheduler"`
	KeepAlive time.Duration `json:"keepalive"`
	// LeaseTimeout: a lease not reported within it goes back to the pool.
	LeaseTimeout time.Duration `json:"lease_timeout"`
	// Recorded: this session gets FrameRecorded (Hello.Recorded asked).
	Recorded bool `json:"recorded,omitempty"`
	// Rules: this session gets FrameRules (Hello.Rules asked).
	Rules bool `json:"rules,omitempty"`
	// Incarnation names the campaign's life on this scheduler (its actor,
	// from its opening to its close): what a fetcher learnt from one
	// (KnownLinks) holds only for it.
	Incarnation uint64 `json:"incarnation,omitempty"`
}

// Refused ends a session with the reason.
type Refused struct {
	Reason string `json:"reason"`
	// Ended: the session's key was ended (OpEnd); the client must not
	// try again (ErrEnded).
	Ended bool `json:"ended,omitempty"`
}

// Credit tells the scheduler how many more URLs the fetcher can take now.
type Credit struct {
	N int `json:"n"`
}

// LeaseKind says what a lease asks the fetcher to do.
type LeaseKind string

// Lease kinds.
const (
	KindPage   LeaseKind = ""       // fetch the URL as a page
	KindRobots LeaseKind = "robots" // fetch the host's robots.txt (URL is the host's root)
	// KindResolve asks for the address the fetcher would dial for the
	// host of URL (its root), without a request to it: the outcome's IP.
	// Only a session whose Hello says Resolve gets one.
	KindResolve LeaseKind = "resolve"
)

// Lease hands one URL to a fetcher until Deadline.
type Lease struct {
	ID    uint64    `json:"id"`
	Kind  LeaseKind `json:"kind,omitempty"`
	URL   string    `json:"url"`
	Depth int       `json:"depth,omitempty"`
	Hops  int       `json:"hops,omitempty"`
	// Embeds is the embeds in a row that led to URL (urlrule.Link.Embeds).
	Embeds int    `json:"embeds,omitempty"`
	Parent string `json:"parent,omitempty"`
	// Path is the hop path from a seed to URL (urlrule.Link.HopPath), for
	// the crawl log; empty for a seed.
	Path        string    `json:"path,omitempty"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	Deadline    time.Time `json:"deadline"`

	// Score is the URL's score (the "score" policy's): given to its seed,
	// or by the page that linked it. The fetcher's link scorer sees it.
	Score float64 `json:"score,omitempty"`

	// Prior is what the campaign's lineage recorded of the URL's last
	// fetch (campaign.Config.From); nil when it has no history. The
	// fetcher asks with its validators and records an unchanged page as a
	// revisit of the capture it names.
	Prior *page.Capture `json:"prior,omitempty"`
}

// Leases is a batch of leases.
type Leases struct {
	Items []Lease `json:"items"`
}

// Outcome reports what became of a lease.
type Outcome struct {
	LeaseID uint64 `json:"lease"`
	// Stored: the page (or the permanent failure) is durable in every sink.
	Stored bool `json:"stored,omitempty"`
	Status int  `json:"status,omitempty"`
	// Retry asks for a later attempt (after RetryAfter when the server said).
	Retry      bool          `json:"retry,omitempty"`
	RetryAfter time.Duration `json:"retry_after,omitempty"`
	// Backoff asks the scheduler to slow the host down (429/503).
	Backoff bool   `json:"backoff,omitempty"`
	Error   string `json:"error,omitempty"`
	// Links are the URLs the page links to, normalized and in scope, as
	// the fetch found them (urlrule.Link: the one link type, with the one
	// depth rule).
	Links []urlrule.Link `json:"links,omitempty"`
	// Robots carries the raw robots.txt of a KindRobots lease.
	Robots *RobotsBody `json:"robots,omitempty"`
	// SinkFailed: the page could not be stored (a sink is down); the URL is
	// put aside for a while without counting an attempt. Links are the
	// page's all the same: followed when the URL is dead-lettered.
	SinkFailed bool `json:"sink_failed,omitempty"`
	// SinkRefused (with SinkFailed): a sink refused the page for good
	// (sink.Permanent, a record over the broker's limit): no retry can
	// store it, so the URL is dead-lettered at once and its links followed.
	SinkRefused bool `json:"sink_refused,omitempty"`
	// Released: the fetcher gives the lease back untouched (pause, stop).
	Released bool `json:"released,omitempty"`
	// Took is the time from the request's start to this report; the
	// scheduler uses it to space a host's request starts by its delay.
	Took time.Duration `json:"took,omitempty"`
	// Latency is the server's response time: from the request's start to
	// its response head (0 without a response). A campaign with a
	// delay_factor spaces the host's requests by it.
	Latency time.Duration `json:"latency,omitempty"`
	// IP is the address the request went to (or, for a KindResolve
	// lease, the one it would go to); empty when no connection was made.
	// A campaign keyed by IP keys the host's clock by it.
	IP string `json:"ip,omitempty"`
	// Reason classifies a failure in one word (page.Reason*: "dns",
	// "refused", "timeout", "tls", "reset", "4xx", "5xx", "sink", ...), for
	// the failure report and the counts by reason.
	Reason string `json:"reason,omitempty"`
	// HostDown: the failure was at the connection level (DNS, refused,
	// connect timeout, TLS, reset before any response); it counts against
	// the host, which the scheduler fails for the campaign after
	// HostRetries such failures.
	HostDown bool `json:"host_down,omitempty"`
	// Known counts the links the fetcher found but left out of Links
	// because a scheduler had recorded them already (KnownLinks): they
	// count as discovered.
	Known int `json:"known,omitempty"`

	// Capture is what the URL's fetch history keeps of this fetch: set
	// for a page stored in full (a 2xx) or as a revisit. A revisit's
	// Capture names the earlier capture it refers to (its Digest and
	// Date), with the validators the server gave this time.
	Capture *page.Capture `json:"capture,omitempty"`
	// Unchanged names the revisit profile (page.RevisitNotModified,
	// page.RevisitIdenticalDigest) of a page stored as a revisit of
	// Lease.Prior. A 304's Links are empty: the scheduler takes them from
	// the URL's history.
	Unchanged string `json:"unchanged,omitempty"`
	// MIME is the response's Content-Type, for the revisit rules that
	// match by media type; empty without a response.
	MIME string `json:"mime,omitempty"`
}

// RobotsBody is a fetched robots.txt.
type RobotsBody struct {
	Status int    `json:"status"`
	Body   []byte `json:"body,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Recorded names outcomes that were recorded (FrameRecorded), by lease.
type Recorded struct {
	Leases []uint64 `json:"leases"`
}

// Outcomes is a batch of outcomes.
type Outcomes struct {
	Items []Outcome `json:"items"`
}

// Errors of the protocol layer.
var (
	// ErrFrameTooLarge: a length prefix above MaxFrame.
	ErrFrameTooLarge = errors.New("frame too large")
	// ErrBadFrame: an empty or undecodable frame.
	ErrBadFrame = errors.New("malformed frame")
	// ErrRefused: the scheduler refused the session (see the message).
	ErrRefused = errors.New("session refused")
	// ErrEnded: the campaign ended this session through the scheduler
	// (OpEnd): it is done, not failed, and must not reconnect.
	ErrEnded = errors.New("session ended by its campaign")
)

// FrameWriter writes frames; not safe for concurrent use.
type FrameWriter struct {
	w   *bufio.Writer
	hdr [5]byte
}

// NewFrameWriter returns a FrameWriter on w, buffered: Flush sends.
func NewFrameWriter(w io.Writer) *FrameWriter {
	return &FrameWriter{w: bufio.NewWriterSize(w, 64<<10)}
}

// WriteFrame encodes v (nil: no payload) as a frame of type t into the
// buffer; Flush sends what is buffered.
func (fw *FrameWriter) WriteFrame(t FrameType, v any) error {
	var payload []byte
	if v != nil {
		var err error
		if payload, err = json.Marshal(v); err != nil {
			return fmt.Errorf("encode %s frame: %w", t, err)
		}
	}
	if len(payload)+1 > MaxFrame {
		return fmt.Errorf("%s frame of %d bytes: %w", t, len(payload), ErrFrameTooLarge)
	}
	binary.BigEndian.PutUint32(fw.hdr[:4], uint32(len(payload)+1))
	fw.hdr[4] = byte(t)
	if _, err := fw.w.Write(fw.hdr[:]); err != nil {
		return err
	}
	_, err := fw.w.Write(payload)
	return err
}

// Flush sends the frames written so far.
func (fw *FrameWriter) Flush() error { return fw.w.Flush() }

// FrameReader reads frames; not safe for concurrent use.
type FrameReader struct {
	r   *bufio.Reader
	buf []byte
}

// NewFrameReader returns a buffered FrameReader on r.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// ReadFrame returns the next frame's type and payload; the payload is
// valid until the next ReadFrame. A frame that is empty or longer than
// MaxFrame is an error (ErrBadFrame, ErrFrameTooLarge).
func (fr *FrameReader) ReadFrame() (FrameType, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 {
		return 0, nil, fmt.Errorf("empty frame: %w", ErrBadFrame)
	}
	if n > MaxFrame {
		return 0, nil, fmt.Errorf("length %d > %d: %w", n, MaxFrame, ErrFrameTooLarge)
	}
	if cap(fr.buf) < int(n) {
		fr.buf = make([]byte, n)
	}
	buf := fr.buf[:n]
	if _, err := io.ReadFull(fr.r, buf); err != nil {
		return 0, nil, fmt.Errorf("frame body: %w", err)
	}
	return FrameType(buf[0]), buf[1:], nil
}

// Decode unmarshals a frame payload into v, wrapping errors as ErrBadFrame.
//
// It reads with github.com/segmentio/encoding/json, a drop-in decoder for
// what encoding/json writes at a quarter of its CPU (BenchmarkOutcomesFrame:
// decoding outcomes was a quarter of the scheduler's CPU). Frames are
// written with encoding/json: segmentio's encoder writes a time.Duration as
// a string ("1.5s"), which encoding/json cannot read, and frames stay
// plain JSON for any peer (TestFramesAreStandardJSON, FuzzDecode).
func Decode(t FrameType, payload []byte, v any) error {
	if err := fastjson.Unmarshal(payload, v); err != nil {
		return fmt.Errorf("%s frame: %v: %w", t, err, ErrBadFrame)
	}
	return nil
}

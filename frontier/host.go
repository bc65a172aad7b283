package frontier

import (
	"container/heap"
	"math"
	"sync/atomic"
	"time"

	"github.com/drover-crawl/drover/frontier/seen"
	"github.com/drover-crawl/drover/urlrule"
)

// entry is one URL the scheduler holds: its delivery stays unacked until
// the URL's outcome is recorded or the URL is re-published elsewhere (and,
// for a batch, until every other URL of it is settled too).
type entry struct {
	key   seen.Key
	msg   urlMsg
	dl    *delivery
	shard int
	// unread: the message could not be read at all; it is dead-lettered as
	// it came.
	unread bool
	// attempt: attempts made before this delivery (header); lost: leases of
	// this delivery lost to dead sessions or deadlines.
	attempt int
	lost    int
	// sinkFails: times every sink refused the page (header); it does not
	// count as a fetch attempt, and is bounded by MaxAttempts too.
	sinkFails int
	prio      float64
	seq       uint64
	settled   atomic.Bool
	// arrived: when the delivery reached this scheduler, until its first
	// lease (the politeness wait metric).
	arrived time.Time
	// history: the URL's fetch history as its last lease read it (a run
	// with From), whose links a 304 for that lease follows.
	history []byte
}

// entryHeap orders a host's entries: highest priority first, then FIFO.
type entryHeap []*entry

func (h entryHeap) Len() int { return len(h) }
func (h entryHeap) Less(i, j int) bool {
	if h[i].prio != h[j].prio {
		return h[i].prio > h[j].prio
	}
	return h[i].seq < h[j].seq
}
func (h entryHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *entryHeap) Push(x any)   { *h = append(*h, x.(*entry)) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

type robotsState uint8

const (
	robotsUnknown  robotsState = iota // not fetched yet: the next lease is the robots lease
	robotsFetching                    // a robots lease is out
	robotsReady                       // rules known until robotsExpiry
)

// host is the scheduler's politeness state for one host. Only the owning
// scheduler (the active consumer of the host's shard) has it.
type host struct {
	name string
	// clock is the host's politeness key (campaign.Config.ClockKey): the
	// shared clock it takes its starts from, and what its shard is a hash
	// of.
	clock    string
	root     string // scheme://host[:port] of the first URL seen, for robots.txt
	queue    entryHeap
	inflight int
	// next is the earliest start of the host's next request.
	next time.Time
	// wake is when the host may lease again (next, or later while its
	// robots.txt is unreachable): the waiting heap's key.
	wake  time.Time
	delay time.Duration
	// adapt: the delay the campaign's delay_factor asks after the host's
	// last response time (campaign.Config.AdaptiveDelay); spacing is the
	// larger of the two.
	adapt    time.Duration
	conc     int
	robots   *urlrule.Robots
	robotsAt time.Time // when the rules expire (ready) or may be retried (unreachable)
	fetched  int64
	// downs counts connection-level failures in a row (DNS, refused,
	// timeout, TLS, reset) by origin (scheme://host:port: one port of a
	// host may refuse while another serves), and under "" those of the
	// host's robots.txt (5xx, unreachable), which stand for the whole host.
	// After the campaign's HostRetries more, the origin (or the host) is
	// down for the campaign, and every URL of it fails without a fetch.
	downs map[string]*downState
	// remote: the state of a start asked of the scheduler that owns the
	// host's IP clock (ipkey.go).
	remote remoteSlot
	// turn: the number of the host's turn (leaser.takeTurn), and turnLeft
	// the leases left in it; 0: the host has no turn.
	turn uint64
	best float64 // head priority, the ready heap's key
	// The small fields together, since a scheduler keeps a host per
	// active host (tens of thousands).
	turnLeft    int32
	index       int32 // in its heap
	robotsState robotsState
	sitemaps    bool // its robots.txt's sitemaps were queued
	down        bool // the whole host is down
	// ip: in a campaign keyed by IP, whether the host's address is known
	// (its clock is then the IP's).
	ip ipState
	// where: which heap the host is in (index: where in it).
	where hostWhere
}

type hostWhere uint8

const (
	inNone hostWhere = iota
	inReady
	inWaiting
)

// needsRobots reports whether the host's next lease must be a robots lease.
func (h *host) needsRobots(now time.Time) bool {
	switch h.robotsState {
	case robotsUnknown:
		return true
	case robotsReady:
		return !now.Before(h.robotsAt)
	}
	return false
}

// hasWork reports whether the host has something to lease.
func (h *host) hasWork() bool {
	if h.robotsState == robotsFetching || h.ip == ipResolving || h.down {
		return false
	}
	return len(h.queue) > 0
}

// hostHeap is a heap of hosts: by next start time (waiting) or by head
// priority (ready).
type hostHeap struct {
	hs    []*host
	ready bool
}

func (h *hostHeap) Len() int { return len(h.hs) }
func (h *hostHeap) Less(i, j int) bool {
	a, b := h.hs[i], h.hs[j]
	if h.ready {
		if a.best != b.best {
			return a.best > b.best
		}
		if ta, tb := a.turnKey(), b.turnKey(); ta != tb {
			return ta < tb
		}
		return a.seqKey() < b.seqKey()
	}
	return a.wake.Before(b.wake)
}

// turnKey orders ready hosts of one priority: those in a turn first, the
// earliest turn first; the others after them (by their head URL's age).
func (h *host) turnKey() uint64 {
	if h.turnLeft == 0 {
		return math.MaxUint64
	}
	return h.turn
}
func (h *host) seqKey() uint64 {
	if len(h.queue) == 0 {
		return 0
	}
	return h.queue[0].seq
}

func (h *hostHeap) Swap(i, j int) {
	h.hs[i], h.hs[j] = h.hs[j], h.hs[i]
	h.hs[i].index = int32(i)
	h.hs[j].index = int32(j)
}
func (h *hostHeap) Push(x any) {
	hh := x.(*host)
	hh.index = int32(len(h.hs))
	h.hs = append(h.hs, hh)
}
func (h *hostHeap) Pop() any {
	old := h.hs
	hh := old[len(old)-1]
	old[len(old)-1] = nil
	h.hs = old[:len(old)-1]
	hh.index = -1
	return hh
}

func (h *hostHeap) remove(hh *host) {
	heap.Remove(h, int(hh.index))
}

// spacing is the time between two request starts to h: its delay
// (configured, or robots.txt's Crawl-delay), or the adaptive delay its
// last response time asks, whichever is larger.
func (h *host) spacing() time.Duration { return max(h.delay, h.adapt) }

package frontier

import (
	"log/slog"
	"sync"
	"time"

	"github.com/drover-crawl/drover/crawllog"
)

// deadLog is the scheduler's part of a campaign's crawl log: a line for
// each URL it dead-letters (a host failed for the campaign, a lease lost
// too often, a page no sink stores) or drops on purpose (robots.txt, an
// exclude), which no worker's line says. Its
// file, crawl-scheduler-NAME.jsonl in the run's crawl log directory, is
// opened at the first such URL: on the scheduler's machine, as the
// workers' are on theirs.
type deadLog struct {
	root, key, name string
	log             *slog.Logger

	mu     sync.Mutex
	w      *crawllog.Writer
	failed bool // could not be opened: said once
	closed bool
}

// newDeadLog is the campaign's deadLog; nil when it keeps no crawl log.
func newDeadLog(root, key, name string, log *slog.Logger) *deadLog {
	if root == "" {
		return nil
	}
	return &deadLog{root: root, key: key, name: "scheduler-" + name, log: log}
}

// write logs m with outcome (crawllog.OutcomeDeadLettered or
// OutcomeDropped), reason and why, after attempts attempts. A line that
// cannot be written is said in the scheduler's log; the URL is settled
// all the same.
func (d *deadLog) write(outcome string, m urlMsg, attempts int, reason, why string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.w == nil && !d.failed && !d.closed {
		w, err := crawllog.Create(d.root, d.key, d.name)
		if err != nil {
			d.failed = true
			d.log.Error("crawl log not opened: dead-lettered URLs have no line", "err", err)
			return
		}
		d.w = w
	}
	if d.w == nil {
		return
	}
	l := crawllog.Line{Time: time.Now().UTC(), Outcome: outcome, URL: m.URL, Path: m.Path, Via: m.Parent,
		Attempt: attempts, Reason: reason, Error: why, Worker: d.name}
	if err := d.w.Write(l); err != nil {
		d.log.Error("crawl log line not written", "url", m.URL, "err", err)
	}
}

// close closes the file, if it was opened.
func (d *deadLog) close() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closed = true
	if d.w != nil {
		if err := d.w.Close(); err != nil {
			d.log.Error("closing the crawl log", "err", err)
		}
		d.w = nil
	}
}

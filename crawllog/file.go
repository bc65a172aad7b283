package crawllog

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// SyncEvery is how often a Writer fsyncs its file while lines are being
// written; Close fsyncs too.
const SyncEvery = time.Second

// Ext ends the name of every crawl log file.
const Ext = ".jsonl"

// Dir is the directory of one run's crawl log files under a campaign's
// crawl_log directory: one per frontier key (campaign.Config.FrontierKey),
// so that a campaign started again under its ID logs apart.
func Dir(root, key string) string {
	return filepath.Join(root, safeName(key))
}

// Writer appends Lines to one file, crawl-WORKER.jsonl in Dir(root, key).
// It is safe for concurrent use.
//
// It keeps no buffer: Write hands each line to the OS in one write(2)
// before it returns, so a line written survives its process being killed
// (SIGKILL, a crash); a background loop fsyncs the file every SyncEvery
// while lines come, and Close fsyncs it, so an OS crash loses at most the
// last SyncEvery's lines.
type Writer struct {
	path string
	stop chan struct{}
	done chan struct{}
	once sync.Once

	mu    sync.Mutex // guards what follows
	f     *os.File
	size  int64 // bytes of whole lines in f
	dirty bool  // written since the last fsync
}

// Create opens (creating, or appending to) the crawl log file of worker in
// Dir(root, key).
func Create(root, key, worker string) (*Writer, error) {
	dir := Dir(root, key)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("crawl log %s: %w (crawl_log names a directory each worker must be able to write)", root, err)
	}
	path := filepath.Join(dir, "crawl-"+safeName(worker)+Ext)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("crawl log: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("crawl log: %w", err)
	}
	w := &Writer{path: path, f: f, size: st.Size(), stop: make(chan struct{}), done: make(chan struct{})}
	go w.syncLoop()
	return w, nil
}

// Path is the file's path.
func (w *Writer) Path() string { return w.path }

// Write appends l as one line; it returns once the OS has the line. A
// failed write is cut off the file (best effort), so the file holds whole
// lines only.
func (w *Writer) Write(l Line) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("crawl log %s: %w", w.path, err)
	}
	b = append(b, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return fmt.Errorf("crawl log %s: %w", w.path, os.ErrClosed)
	}
	n, err := w.f.Write(b)
	if err != nil {
		if n > 0 {
			_ = w.f.Truncate(w.size)
		}
		return fmt.Errorf("crawl log %s: %w", w.path, err)
	}
	w.size += int64(n)
	w.dirty = true
	return nil
}

// Sync fsyncs the file when lines were written since the last fsync.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.syncLocked()
}

func (w *Writer) syncLocked() error {
	if w.f == nil || !w.dirty {
		return nil
	}
	if err := w.f.Sync(); err != nil {
		return fmt.Errorf("crawl log %s: fsync: %w", w.path, err)
	}
	w.dirty = false
	return nil
}

func (w *Writer) syncLoop() {
	defer close(w.done)
	t := time.NewTicker(SyncEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			if err := w.Sync(); err != nil {
				slog.Warn("crawl log not synced; its lines are written, an OS crash could lose them", "err", err)
			}
		}
	}
}

// Close fsyncs and closes the file; Write fails after it.
func (w *Writer) Close() error {
	w.once.Do(func() { close(w.stop) })
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.f == nil {
		return nil
	}
	err := w.syncLocked()
	err = errors.Join(err, w.f.Close())
	w.f = nil
	return err
}

// safeName keeps a campaign key or worker identity to one path element.
func safeName(s string) string {
	if s == "" || s == "." || s == ".." {
		return "default"
	}
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-' || r == '~' || r == '@' {
			return r
		}
		return '_'
	}, s)
}

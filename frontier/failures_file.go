package frontier

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
)

// fileFailures is a FailureStore in a directory: one JSON-lines file per
// campaign, appended and synced per call, read whole by Failures (later
// lines of a URL fold into earlier ones). It is LogSeen's; a torn last line
// (a crash mid-append) is skipped.
type fileFailures struct {
	dir string
	mu  sync.Mutex
}

func (f *fileFailures) path(c string) (string, error) {
	if c == "" || strings.ContainsAny(c, `/\`) || c == "." || c == ".." {
		return "", fmt.Errorf("failure store: bad campaign id %q", c)
	}
	return filepath.Join(f.dir, c+".jsonl"), nil
}

// RecordFailures implements FailureStore.
func (f *fileFailures) RecordFailures(c string, fs []FailureRecord) error {
	if len(fs) == 0 {
		return nil
	}
	p, err := f.path(c)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		return fmt.Errorf("failure store: %w", err)
	}
	file, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("failure store: %w", err)
	}
	w := bufio.NewWriter(file)
	enc := json.NewEncoder(w)
	for _, r := range fs {
		if err := enc.Encode(r); err != nil {
			file.Close()
			return fmt.Errorf("failure store: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		file.Close()
		return fmt.Errorf("failure store: %w", err)
	}
	if err := file.Sync(); err != nil {
		file.Close()
		return fmt.Errorf("failure store: %w", err)
	}
	return file.Close()
}

// Failures implements FailureStore.
func (f *fileFailures) Failures(c, reason string) ([]FailureRecord, error) {
	p, err := f.path(c)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	file, err := os.Open(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failure store: %w", err)
	}
	defer file.Close()
	byURL := map[string]FailureRecord{}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var r FailureRecord
		if json.Unmarshal(sc.Bytes(), &r) != nil || r.URL == "" {
			continue // a torn line
		}
		byURL[r.URL] = mergeFailure(byURL[r.URL], r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("failure store: %w", err)
	}
	var out []FailureRecord
	for _, r := range byURL {
		if reason == "" || r.Reason == reason {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, nil
}

// DropFailures implements FailureStore.
func (f *fileFailures) DropFailures(c string) error {
	p, err := f.path(c)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failure store: %w", err)
	}
	return nil
}

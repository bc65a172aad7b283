package frontier

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The on-disk failure records: a URL recorded again folds into one record
// (first kept, attempts added), a reason filters, a torn last line (a crash
// mid-append) is skipped, the records survive a reopen, and Drop removes
// them; the store is LogSeen's.
func TestLogSeenKeepsFailures(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenLogSeen(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	if err := s.RecordFailures("c1", []FailureRecord{
		{URL: "http://a/", Reason: "dns", Attempts: 1, LastError: "first", First: t0, Last: t0},
		{URL: "http://b/", Reason: "4xx", Attempts: 1, LastError: "404", First: t0, Last: t0},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordFailures("c1", []FailureRecord{{URL: "http://a/", Reason: "dns", Attempts: 2, LastError: "second", First: t1, Last: t1}}); err != nil {
		t.Fatal(err)
	}
	// A torn line, as a crash mid-append leaves it.
	f, err := os.OpenFile(filepath.Join(dir, "_failures", "c1.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"url":"http://c/","rea`)
	f.Close()
	s.Close()
	if s, err = OpenLogSeen(dir); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	all, err := s.Failures("c1", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 {
		t.Fatalf("records %+v, want a and b", all)
	}
	a := all[0]
	if a.URL != "http://a/" || a.Attempts != 3 || !a.First.Equal(t0) || !a.Last.Equal(t1) || a.LastError != "second" {
		t.Errorf("folded record %+v", a)
	}
	dns, _ := s.Failures("c1", "dns")
	if len(dns) != 1 || dns[0].URL != "http://a/" {
		t.Errorf("reason dns: %+v", dns)
	}
	if other, _ := s.Failures("c2", ""); len(other) != 0 {
		t.Errorf("another campaign sees %+v", other)
	}
	if err := s.Drop("c1"); err != nil { // marks only
		t.Fatal(err)
	}
	if kept, _ := s.Failures("c1", ""); len(kept) != 2 {
		t.Errorf("dropping the marks dropped the failure records: %+v", kept)
	}
	if err := s.DropFailures("c1"); err != nil {
		t.Fatal(err)
	}
	if gone, _ := s.Failures("c1", ""); len(gone) != 0 {
		t.Errorf("after DropFailures: %+v", gone)
	}
}

package seen_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/drover-crawl/drover/failure"
)

// A store whose tables of marks are damaged is replaced, and its marks are
// lost (URLs may be fetched again); its failure records and live rules,
// written after the marks and still in its WAL, are kept: they are a
// campaign's only account of the URLs that failed.
func TestPebbleSeenDamagedKeepsFailureRecords(t *testing.T) {
	dir := t.TempDir()
	s := openPebble(t, dir)
	old := keys("old", 60_000)
	for i := 0; i < len(old); i += 2000 {
		if err := s.MarkQueued("c", old[i:i+2000]); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(); err != nil {
		t.Fatal(err)
	}
	fails := []failure.Record{{URL: "http://f.example/a", Reason: "dns", Attempts: 3}, {URL: "http://f.example/b", Reason: "excluded"}}
	if err := s.RecordFailures("c", fails); err != nil {
		t.Fatal(err)
	}
	rules := []byte(`{"version":2,"exclude":["/cal/"]}`)
	if err := s.SetRules("c", rules); err != nil {
		t.Fatal(err)
	}
	hist := keys("hist", 3)
	if err := s.SetHistory("c", hist, [][]byte{[]byte("h0"), []byte("h1"), []byte("h2")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	scrambled := 0
	eachFile(t, dir, func(p string) error {
		if !strings.HasSuffix(p, ".sst") {
			return nil
		}
		scrambled++
		return rot(p)
	})
	if scrambled == 0 {
		t.Fatal("no sstable to damage: write more marks")
	}

	s = openPebble(t, dir)
	defer s.Close()
	// Reading the marks finds the damage and has the store replaced.
	for _, k := range old[:200] {
		if _, err := s.Done("c", k); err != nil {
			t.Fatal(err)
		}
	}
	q, err := s.Queued("c", old[:1000])
	if err != nil {
		t.Fatal(err)
	}
	if countTrue(q) == len(q) {
		t.Fatal("the damaged marks all read back: the store was not damaged where the test meant")
	}
	got, err := s.Failures("c", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(fails) || got[0].URL != fails[0].URL || got[0].Attempts != 3 || got[1].Reason != "excluded" {
		t.Errorf("failure records after the damage: %+v, want %+v", got, fails)
	}
	r, err := s.Rules("c")
	if err != nil || string(r) != string(rules) {
		t.Errorf("rules after the damage: %q, %v; want %q", r, err, rules)
	}
	for i, k := range hist {
		if h, err := s.History("c", k); err != nil || string(h) != fmt.Sprintf("h%d", i) {
			t.Errorf("history %d after the damage: %q, %v", i, h, err)
		}
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}

// rot flips bits in the middle half of a file, as bit rot does: its size
// stays, so the store opens and finds the damage when it reads.
func rot(p string) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	for i := len(b) / 4; i < 3*len(b)/4; i += 97 {
		b[i] ^= 0x5a
	}
	return os.WriteFile(p, b, 0o644)
}

package seen_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/drover-crawl/drover/failure"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
		require.NoError(t, s.MarkQueued("c", old[i:i+2000]))
	}
	require.NoError(t, s.Compact())
	fails := []failure.Record{{URL: "http://f.example/a", Reason: "dns", Attempts: 3}, {URL: "http://f.example/b", Reason: "excluded"}}
	require.NoError(t, s.RecordFailures("c", fails))
	rules := []byte(`{"version":2,"exclude":["/cal/"]}`)
	require.NoError(t, s.SetRules("c", rules))
	hist := keys("hist", 3)
	require.NoError(t, s.SetHistory("c", hist, [][]byte{[]byte("h0"), []byte("h1"), []byte("h2")}))
	require.NoError(t, s.Close())
	scrambled := 0
	eachFile(t, dir, func(p string) error {
		if !strings.HasSuffix(p, ".sst") {
			return nil
		}
		scrambled++
		return rot(p)
	})
	require.NotZero(t, scrambled, "no sstable to damage: write more marks")

	s = openPebble(t, dir)
	defer s.Close()
	// Reading the marks finds the damage and has the store replaced.
	for _, k := range old[:200] {
		_, err := s.Done("c", k)
		require.NoError(t, err)
	}
	q, err := s.Queued("c", old[:1000])
	require.NoError(t, err)
	require.NotEqual(t, len(q), countTrue(q), "the damaged marks all read back: the store was not damaged where the test meant")
	got, err := s.Failures("c", "")
	require.NoError(t, err)
	if len(got) != len(fails) || got[0].URL != fails[0].URL || got[0].Attempts != 3 || got[1].Reason != "excluded" {
		assert.Fail(t, fmt.Sprintf("failure records after the damage: %+v, want %+v", got, fails))
	}
	r, err := s.Rules("c")
	if assert.NoError(t, err, "rules after the damage") {
		assert.Equal(t, string(rules), string(r), "rules after the damage")
	}
	for i, k := range hist {
		if h, err := s.History("c", k); err != nil || string(h) != fmt.Sprintf("h%d", i) {
			assert.Fail(t, fmt.Sprintf("history %d after the damage: %q, %v", i, h, err))
		}
	}
	_, err = os.Stat(dir)
	require.NoError(t, err)
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

package seen

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestL0TablesBeforeACompaction: level 0 gathers L0Tables flushed tables
// before Pebble compacts it; at Pebble's own 4 the same writes compact.
func TestL0TablesBeforeACompaction(t *testing.T) {
	// flush writes 12 memtables' worth of marks, flushing each, and
	// returns the store's level 0 tables and the compactions begun
	// within wait of the last flush.
	flush := func(l0 int, wait time.Duration) (tables, compactions int64) {
		p, err := OpenPebble(t.TempDir(), PebbleOptions{MemTableBytes: 64 << 10, L0Tables: l0})
		require.NoError(t, err)
		defer p.Close()
		for n := range 12 {
			keys := make([]Key, 2000)
			for i := range keys {
				keys[i] = KeyOf(fmt.Sprintf("http://h.test/%d/%d", n, i))
			}
			require.NoError(t, p.MarkQueued("c", keys))
			require.NoError(t, p.db.Flush())
		}
		deadline := time.Now().Add(wait)
		for {
			m := p.db.Metrics()
			if begun := m.Compact.Count + m.Compact.NumInProgress; begun > 0 || !time.Now().Before(deadline) {
				return m.Levels[0].TablesCount, begun
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	tables, compactions := flush(0, 0)
	assert.Zero(t, compactions, "12 flushes stay in level 0 at the default of %d tables", DefaultL0CompactionThreshold)
	assert.GreaterOrEqual(t, tables, int64(12))
	_, compactions = flush(4, 10*time.Second)
	assert.Positive(t, compactions, "at 4 tables level 0 is compacted")
}

package campaign

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRunsSortInStartOrder: a run started later is after every earlier
// one, whatever its random part, and a key without a run is before all.
func TestRunsSortInStartOrder(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)
	prev := Config{ID: "news"}.FrontierKey()
	require.Equal(t, "news", prev, "key without a run: want the ID")
	for i, r := range []uint64{0, 1<<64 - 1, 7, 36*36*36*36 - 1, 36 * 36 * 36 * 36} {
		c := Config{ID: "news", Run: NewRun(t0.Add(time.Duration(i)*time.Millisecond), r)}
		require.NoError(t, c.WithDefaults().validRun(), "run %q", c.Run)
		key := c.FrontierKey()
		if !RunAfter(key, prev) || RunAfter(prev, key) {
			assert.Fail(t, fmt.Sprintf("run %s (started %d ms later) is not after %s", key, i, prev))
		}
		assert.Equalf(t, "news", KeyID(key), "KeyID(%q)", key)
		prev = key
	}
}

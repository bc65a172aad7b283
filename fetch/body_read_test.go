package fetch

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readCapped returns the bytes up to the cap and says whether there were
// more, whatever the size hint says (a Content-Length may lie).
func TestReadCappedHints(t *testing.T) {
	const limit = 100
	for _, n := range []int{0, 1, 99, 100, 101, 1000} {
		body := strings.Repeat("x", n)
		for _, hint := range []int64{-1, 0, 1, int64(n), int64(n) + 1, limit, 10 * limit} {
			got, truncated, err := readCapped(strings.NewReader(body), limit, hint)
			require.True(t, err == nil, err)
			want := body[:min(n, limit)]
			assert.Equal(t, want, string(got), fmt.Sprint("n=", n, " hint=", hint))
			assert.Equal(t, n > limit, truncated, fmt.Sprint("n=", n, " hint=", hint))
		}
	}
}

// A body of known length is read into one buffer, not grown from 512
// bytes (io.ReadAll made six allocations for 8 KB).
func TestReadCappedOneAllocation(t *testing.T) {
	body := bytes.Repeat([]byte("<p>8 KB page</p>"), 512)
	r := bytes.NewReader(body)
	allocs := testing.AllocsPerRun(20, func() {
		r.Reset(body)
		got, _, _ := readCapped(r, 1<<20, int64(len(body)))
		if len(got) != len(body) {
			require.FailNow(t, fmt.Sprintf("read %d bytes, want %d", len(got), len(body)))
		}
	})
	// The LimitReader and the buffer.
	assert.True(t, allocs <= 2, fmt.Sprint("allocations per read: ", allocs))
}

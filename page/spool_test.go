package page

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSpool: a spool holds what was written, with its size and the
// digest PayloadDigest gives the same bytes; readers are independent and
// concurrent; it leaves no name in its directory; after Close (twice)
// reading fails with ErrSpoolClosed.
func TestSpool(t *testing.T) {
	dir := t.TempDir()
	s, err := CreateSpool(dir)
	require.NoError(t, err)
	body := bytes.Repeat([]byte("0123456789abcdef"), 100_000)
	for off := 0; off < len(body); off += 7000 {
		_, err := s.Write(body[off:min(off+7000, len(body))])
		require.NoError(t, err)
	}
	s.Seal()
	if s.Size() != int64(len(body)) || s.Digest() != PayloadDigest(body) {
		require.FailNow(t, fmt.Sprintf("size %d digest %s, want %d %s", s.Size(), s.Digest(), len(body), PayloadDigest(body)))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 && s.path == "" {
		require.FailNow(t, fmt.Sprintf("unlinked, yet %d names in its directory", len(ents)))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := io.ReadAll(s.Reader())
			if err != nil || !bytes.Equal(got, body) {
				assert.Fail(t, fmt.Sprintf("a reader got %d bytes (%v), want %d", len(got), err, len(body)))
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "second Close")
	_, err = io.ReadAll(s.Reader())
	require.ErrorIs(t, err, ErrSpoolClosed, "read after Close")
}

package page

import (
	"bytes"
	"errors"
	"io"
	"os"
	"sync"
	"testing"
)

// TestSpool: a spool holds what was written, with its size and the
// digest PayloadDigest gives the same bytes; readers are independent and
// concurrent; it leaves no name in its directory; after Close (twice)
// reading fails with ErrSpoolClosed.
func TestSpool(t *testing.T) {
	dir := t.TempDir()
	s, err := CreateSpool(dir)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 100_000)
	for off := 0; off < len(body); off += 7000 {
		if _, err := s.Write(body[off:min(off+7000, len(body))]); err != nil {
			t.Fatal(err)
		}
	}
	s.Seal()
	if s.Size() != int64(len(body)) || s.Digest() != PayloadDigest(body) {
		t.Fatalf("size %d digest %s, want %d %s", s.Size(), s.Digest(), len(body), PayloadDigest(body))
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 && s.path == "" {
		t.Fatalf("unlinked, yet %d names in its directory", len(ents))
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			got, err := io.ReadAll(s.Reader())
			if err != nil || !bytes.Equal(got, body) {
				t.Errorf("a reader got %d bytes (%v), want %d", len(got), err, len(body))
			}
		})
	}
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := io.ReadAll(s.Reader()); !errors.Is(err, ErrSpoolClosed) {
		t.Fatalf("read after Close: %v, want ErrSpoolClosed", err)
	}
}

package page

import (
	"crypto/sha1"
	"encoding/base32"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
)

// Spool is a body kept in a temporary file instead of memory: the fetcher
// spools a body larger than its in-memory threshold as it arrives, so that
// a worker's memory does not grow with the size of a body. Its size and
// payload digest are computed while it is written.
//
// The file is unlinked as soon as it is created (where the system allows
// it, as Linux and macOS do): its disk space goes with its last open
// descriptor, so a spool never outlives the process, even one killed with
// SIGKILL. Close releases it; Readers read it concurrently.
type Spool struct {
	f      *os.File
	path   string // "" once unlinked
	size   int64
	h      hash.Hash
	digest string

	closeOnce sync.Once
	closeErr  error
}

// ErrSpoolClosed is the error of reading a Spool after Close.
var ErrSpoolClosed = errors.New("body spool closed")

// CreateSpool creates an empty spool in dir (os.TempDir() when "").
func CreateSpool(dir string) (*Spool, error) {
	f, err := os.CreateTemp(dir, "drover-body-*")
	if err != nil {
		return nil, fmt.Errorf("body spool: %w (set TMPDIR to a directory with room for the largest body)", err)
	}
	s := &Spool{f: f, path: f.Name(), h: sha1.New()}
	if os.Remove(s.path) == nil {
		s.path = ""
	}
	return s, nil
}

// Write appends b to the body, hashing it. It must not be called after
// Seal.
func (s *Spool) Write(b []byte) (int, error) {
	n, err := s.f.Write(b)
	s.h.Write(b[:n])
	s.size += int64(n)
	return n, err
}

// Seal ends writing: Digest is set from then on.
func (s *Spool) Seal() {
	if s.h != nil {
		s.digest = "sha1:" + base32.StdEncoding.EncodeToString(s.h.Sum(nil))
		s.h = nil
	}
}

// Size is the body's length in bytes.
func (s *Spool) Size() int64 { return s.size }

// Digest is the body's payload digest (PayloadDigest of the whole body),
// once sealed.
func (s *Spool) Digest() string { return s.digest }

// Reader reads the body from its start; each Reader is independent, so
// sinks storing one page at once each read their own.
func (s *Spool) Reader() io.Reader { return io.NewSectionReader(s, 0, s.size) }

// ReadAt reads the body at off (io.ReaderAt); it fails with ErrSpoolClosed
// after Close.
func (s *Spool) ReadAt(b []byte, off int64) (int, error) {
	n, err := s.f.ReadAt(b, off)
	if errors.Is(err, os.ErrClosed) {
		err = ErrSpoolClosed
	}
	return n, err
}

// Close releases the file (and removes it when it could not be unlinked
// at creation). It is idempotent.
func (s *Spool) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = s.f.Close()
		if s.path != "" {
			if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) && s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

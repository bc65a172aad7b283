// Package seentest damages the files of a closed seen.Pebble store, the way
// a failing disk or a careless operator might, for the tests of its
// recovery in seen and of a whole crawl's in node.
package seentest

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// EachFile calls f with the path of every file of the Pebble store in dir
// (a directory seen.OpenPebble was given), and stops at the first error.
func EachFile(dir string, f func(path string) error) error {
	return filepath.WalkDir(filepath.Join(dir, "pebble"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return f(path)
	})
}

// Damage damages the files of a closed seen store in dir: every file of
// the Pebble store is cut to a random length (some to nothing) and has
// random bytes written over it at random places; one file in four is
// removed. It returns the paths it damaged. Opening the store afterwards
// must succeed and answer "not seen" for whatever it cannot read.
func Damage(dir string, seed uint64) ([]string, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var damaged []string
	err := EachFile(dir, func(path string) error {
		damaged = append(damaged, path)
		if rng.IntN(4) == 0 {
			return os.Remove(path)
		}
		return scramble(path, rng)
	})
	if err != nil {
		return damaged, fmt.Errorf("damage seen store: %w", err)
	}
	return damaged, nil
}

func scramble(path string, rng *rand.Rand) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	size := fi.Size()
	if size > 0 {
		size = rng.Int64N(size + 1)
	}
	if err := os.Truncate(path, size); err != nil {
		return err
	}
	if size == 0 {
		return nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	junk := make([]byte, 64)
	for range 1 + size/4096 {
		for i := range junk {
			junk[i] = byte(rng.Uint32())
		}
		if _, err := f.WriteAt(junk[:rng.IntN(len(junk))+1], rng.Int64N(size)); err != nil {
			return err
		}
	}
	return f.Sync()
}

// Truncate cuts the file at path to frac of its length.
func Truncate(path string, frac float64) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	return os.Truncate(path, int64(float64(fi.Size())*frac))
}

// Overwrite writes junk over the file at path at each of the offsets that
// at returns for the file's size, and fsyncs it.
func Overwrite(path string, junk []byte, at func(size int64) []int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	for _, off := range at(fi.Size()) {
		if _, err := f.WriteAt(junk, off); err != nil {
			return err
		}
	}
	return f.Sync()
}

// ScrambleEvery writes 8 junk bytes every step bytes of the file at path
// from its 64th on (in an sstable: every block, footer and properties
// included), keeping its length.
func ScrambleEvery(path string, step int64) error {
	junk := []byte("\xde\xad\xbe\xef\x00\xff\x5a\xa5")
	return Overwrite(path, junk, func(size int64) []int64 {
		var at []int64
		for off := int64(64); off+int64(len(junk)) <= size; off += step {
			at = append(at, off)
		}
		return at
	})
}

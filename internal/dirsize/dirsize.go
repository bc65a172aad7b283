// Package dirsize measures the disk space of a directory's files, for the
// seen store's size metric and for the benchmarks.
package dirsize

import (
	"os"
	"path/filepath"
)

// Of returns the bytes the regular files below dir take (their sizes, not
// their blocks); what cannot be read counts nothing, and a missing dir is 0.
func Of(dir string) int64 {
	var n int64
	filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

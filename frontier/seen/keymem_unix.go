//go:build unix

package seen

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// keyMemory returns n zeroed Keys outside the Go heap, in an anonymous
// mapping: the collector neither scans them nor counts them toward its
// next goal, so a table of 32 MB costs 32 MB of RSS, not twice that under
// GOGC 100. The pages are taken from the OS as they are first written.
// free unmaps them; nothing may use the Keys after it. Where the mapping
// fails, the Keys come from the heap and free does nothing.
func keyMemory(n int) (keys []Key, free func()) {
	b, err := unix.Mmap(-1, 0, n*len(Key{}), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]Key, n), func() {}
	}
	return unsafe.Slice((*Key)(unsafe.Pointer(&b[0])), n), func() { _ = unix.Munmap(b) }
}

// Package cmalloc holds C's malloc to two arenas in a program that imports
// it, for a process whose C allocations are Pebble's: the seen store's
// block cache and memtables, allocated with C's calloc when cgo is on.
//
// glibc's malloc gives each thread that allocates an arena of its own, up
// to eight per core, and an arena keeps the pages it once used. Pebble
// allocates from whichever of the Go runtime's threads runs it, so a
// scheduler's block cache spread over six arenas and about 45 MB at a
// million URLs, against about 25 MB in two (bench/README.md, "The
// scheduler's allocations at a million pages"). A cache block is tens of
// kilobytes, so two arenas are no point of contention.
//
// The limit is set when the program is loaded, before the Go runtime
// starts its threads (a limit set from Go would leave the arenas those
// threads made already). MALLOC_ARENA_MAX in the environment, or
// glibc.malloc.arena_max in GLIBC_TUNABLES, overrides it.
// Without cgo, or with a C library other than glibc, importing the package
// does nothing.
package cmalloc

// Arenas is the number of arenas C's malloc has made in this process
// (0 when it cannot tell: no cgo, or not glibc).
func Arenas() int { return arenas() }

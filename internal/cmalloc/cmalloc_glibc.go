//go:build cgo && linux

package cmalloc

/*
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// drover_two_arenas runs when the program is loaded, before the Go runtime
// starts the threads that would each make an arena. A limit given in the
// environment, either way glibc reads one, wins.
__attribute__((constructor)) static void drover_two_arenas(void) {
#ifdef M_ARENA_MAX
	const char *tunables = getenv("GLIBC_TUNABLES");
	if (getenv("MALLOC_ARENA_MAX") == NULL && (tunables == NULL || strstr(tunables, "malloc.arena_max") == NULL)) {
		mallopt(M_ARENA_MAX, 2);
	}
#endif
}

// drover_malloc_info writes malloc_info's XML into a buffer the caller
// frees; NULL where the C library has none.
static char *drover_malloc_info(size_t *n) {
#ifdef __GLIBC__
	char *buf = NULL;
	FILE *f = open_memstream(&buf, n);
	if (f == NULL) {
		return NULL;
	}
	malloc_info(0, f);
	fclose(f);
	return buf;
#else
	return NULL;
#endif
}
*/
import "C"

import (
	"strings"
	"unsafe"
)

// arenas counts the heaps of glibc's malloc_info report.
func arenas() int {
	var n C.size_t
	p := C.drover_malloc_info(&n)
	if p == nil {
		return 0
	}
	defer C.free(unsafe.Pointer(p))
	return strings.Count(C.GoStringN(p, C.int(n)), "<heap nr=")
}

// touch allocates and frees a small block of C memory from the calling
// thread, which gives the thread its arena.
func touch() { C.free(C.malloc(64)) }

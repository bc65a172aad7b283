package cmalloc

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// childEnv makes the test binary a child that reports its arenas after
// its threads allocate.
const childEnv = "DROVER_CMALLOC_CHILD"

// threads is how many threads of the child allocate.
const threads = 8

// TestTwoArenasWhateverTheThreads runs a child whose 8 threads each make
// their first C allocation, as the package leaves malloc and with
// MALLOC_ARENA_MAX=16, and counts the arenas glibc reports: with the
// environment's limit each thread gets its own, with the package's they
// share two.
func TestTwoArenasWhateverTheThreads(t *testing.T) {
	if Arenas() == 0 {
		t.Skip("no cgo or no glibc: the package has nothing to limit")
	}
	limited := childArenas(t)
	free := childArenas(t, "MALLOC_ARENA_MAX=16")
	t.Logf("arenas after %d threads allocate: %d as the package leaves malloc, %d with MALLOC_ARENA_MAX=16", threads, limited, free)
	require.Greater(t, free, 2, "with MALLOC_ARENA_MAX=16 the threads should have made arenas of their own")
	require.LessOrEqual(t, limited, 2, "the package should hold every thread to two arenas")
	require.GreaterOrEqual(t, limited, 1)
}

func childArenas(t *testing.T, env ...string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestArenasChild$", "-test.count=1")
	// The child's limit is the package's or the one given here, never one
	// this process's environment happens to set.
	var base []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MALLOC_ARENA_MAX=") && !strings.HasPrefix(kv, "GLIBC_TUNABLES=") {
			base = append(base, kv)
		}
	}
	cmd.Env = append(append(base, childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "child: %s", out)
	for line := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "arenas="); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err)
			return n
		}
	}
	require.FailNow(t, "the child reported no arena count", "%s", out)
	return 0
}

// TestArenasChild is the child of TestTwoArenasWhateverTheThreads; it does
// nothing unless run as one.
func TestArenasChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestTwoArenasWhateverTheThreads")
	}
	var touched, release sync.WaitGroup
	touched.Add(threads)
	release.Add(1)
	for range threads {
		go func() {
			// A thread of its own for each, alive until every one has
			// allocated.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			touch()
			touched.Done()
			release.Wait()
		}()
	}
	touched.Wait()
	n := Arenas()
	release.Done()
	os.Stdout.WriteString("arenas=" + strconv.Itoa(n) + "\n")
}

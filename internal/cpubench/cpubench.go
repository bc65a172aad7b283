// Package cpubench reports the CPU time a benchmark's process spends per
// operation. On a shared machine ns/op counts the time a benchmark waits
// for a core; the process's CPU time (user and system, the garbage
// collector's included) does not, and it is what the crawl's cost goal
// (CPU-s per 1,000 pages) counts.
package cpubench

import (
	"syscall"
	"testing"
	"time"
)

// Start reads the process's CPU time; call it just before the benchmark's
// loop, and the function it returns just after: that reports cpu-ns/op.
func Start(b *testing.B) (stop func()) {
	start := used()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(used()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// used is the process's user and system CPU time so far.
func used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

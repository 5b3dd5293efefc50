//go:build unix

package packrun

import (
	"syscall"
	"testing"
	"time"
)

// reportCPU adds "cpu-ns/op", the process's user+system CPU time per
// iteration, which the other engineers' load on the machine disturbs less
// than wall-clock ns/op. Call it before the loop; it reports when b ends.
func reportCPU(b *testing.B) {
	start := cpuTime()
	b.Cleanup(func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op") })
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

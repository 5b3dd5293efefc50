package sqlite

import (
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkRecordAttempt10K: the store's side of BenchmarkEvidenceCost's
// 10k case (and, as "hello", of its C hello case) — an attempt whose input is 10 KB and whose output echoes it,
// as the dispatcher hands it over (JSON already compact) — recorded
// durably by 32 callers per CPU. cpu-µs/attempt is the process's user +
// system CPU ÷ attempts, which the load of a shared machine moves less
// than the rate. The file stands alone so it can be copied into an older
// tree as the anchor.
func BenchmarkRecordAttempt10K(b *testing.B) {
	name := strings.Repeat("x", 10_000)
	in := json.RawMessage(`{"name":"` + name + `"}`)
	out := json.RawMessage(`{"greeting":"Hello, ` + name + `!"}`)
	for _, size := range []string{"10k", "hello"} {
		b.Run(size, func(b *testing.B) {
			s := benchStore(b)
			b.SetParallelism(32)
			cpu0 := benchProcessCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					a := helloAttempt()
					if size == "10k" {
						a.Input, a.Output = in, out
					}
					a.Compact = true
					if err := s.RecordAttempt(ctx, a); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
			b.ReportMetric(float64((benchProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/attempt")
		})
	}
}

func benchProcessCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package sqlite

import (
	"context"
	"testing"

	"github.com/packrun/packrun/host"
)

// BenchmarkRecordAttemptAudited: the store's side of POST /v1/invoke —
// the C hello's attempt with its api_call audit event in the same
// transaction — from one caller (a one-client server: every commit
// carries one attempt, so what a transaction costs whatever it holds
// counts in full) and from 32 callers per CPU (many clients: commits
// are shared). writer-cpu-µs/attempt is the single writer's thread CPU ÷
// attempts (WriterStats), the serial part every request waits for. The
// file stands alone so it can be copied into an older tree as the anchor.
func BenchmarkRecordAttemptAudited(b *testing.B) {
	for _, callers := range []int{1, 32} {
		name := "callers=1"
		if callers > 1 {
			name = "callers=32-per-cpu"
		}
		b.Run(name, func(b *testing.B) { benchRecordAttemptAudited(b, callers) })
	}
}

func benchRecordAttemptAudited(b *testing.B, parallelism int) {
	s := benchStore(b)
	w0 := s.WriterStats()
	cpu0 := benchProcessCPU()
	record := func() error {
		a := helloAttempt()
		a.Compact = true
		actx := host.WithAudit(context.Background(), &host.Audit{Type: "api_call", Of: host.AuditAttempt,
			Data: map[string]string{"method": "POST", "route": "POST /v1/invoke", "tenant": "default", "token_id": "5b3baf407c95", "token_name": "bench"}})
		return s.RecordAttempt(actx, a)
	}
	b.ResetTimer()
	if parallelism == 1 {
		for range b.N {
			if err := record(); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism(parallelism)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := record(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	w := s.WriterStats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
	b.ReportMetric(float64((benchProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/attempt")
	b.ReportMetric(float64((w.CPU-w0.CPU).Nanoseconds())/1000/float64(b.N), "writer-cpu-µs/attempt")
	b.ReportMetric(float64(w.Ops-w0.Ops)/float64(max(1, w.Commits-w0.Commits)), "ops/commit")
}

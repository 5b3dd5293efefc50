package sqlite

import (
	"context"
	"testing"

	"github.com/packrun/packrun/host"
)

// BenchmarkRecordAttemptAudited: the store's side of POST /v1/invoke at
// many clients — the C hello's attempt with its api_call audit event in
// the same transaction, 32 callers per CPU. writer-cpu-µs/attempt is the
// single writer's thread CPU ÷ attempts (WriterStats), the serial part
// every request waits for. The file stands alone so it can be copied into
// an older tree as the anchor.
func BenchmarkRecordAttemptAudited(b *testing.B) {
	s := benchStore(b)
	b.SetParallelism(32)
	w0 := s.WriterStats()
	cpu0 := benchProcessCPU()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			a := helloAttempt()
			a.Compact = true
			actx := host.WithAudit(context.Background(), &host.Audit{Type: "api_call", Of: host.AuditAttempt,
				Data: map[string]string{"method": "POST", "route": "POST /v1/invoke", "tenant": "default", "token_id": "5b3baf407c95", "token_name": "bench"}})
			if err := s.RecordAttempt(actx, a); err != nil {
				b.Error(err)
				return
			}
		}
	})
	w := s.WriterStats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
	b.ReportMetric(float64((benchProcessCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/attempt")
	b.ReportMetric(float64((w.CPU-w0.CPU).Nanoseconds())/1000/float64(b.N), "writer-cpu-µs/attempt")
	b.ReportMetric(float64(w.Ops-w0.Ops)/float64(max(1, w.Commits-w0.Commits)), "ops/commit")
}

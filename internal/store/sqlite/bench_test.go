package sqlite

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// cycle runs one task through the queue the way the dispatcher does:
// enqueue, claim, record the attempt, finish. Every step returns only after
// its commit is durable (synchronous=FULL).
func cycle(b *testing.B, s *Store, runner string) {
	if _, err := s.Enqueue(ctx, host.TaskIntent{TaskType: "bench", Source: "bench", Payload: json.RawMessage(`{"n":1}`)}, host.EnqueueOptions{}); err != nil {
		b.Fatal(err)
	}
	task, err := s.Claim(ctx, runner, time.Time{})
	if err != nil {
		b.Fatal(err)
	}
	a := &host.Attempt{TaskID: task.TaskID, Attempt: task.AttemptCount, Pack: "local.bench@1.0.0", Node: "bench", Outcome: abi.Completed,
		Input: task.Payload, Output: json.RawMessage(`{"ok":true}`), Trace: json.RawMessage(`[{"fn":"openwop_now_ms","result":1}]`)}
	if err := s.RecordAttempt(ctx, a); err != nil {
		b.Fatal(err)
	}
	if _, err := s.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: okOutcome()}); err != nil {
		b.Fatal(err)
	}
}

func benchStore(b *testing.B) *Store {
	return newFixture(b, Options{Now: time.Now}).Store
}

// BenchmarkTaskCycle: one dispatcher goroutine, tasks one after another.
func BenchmarkTaskCycle(b *testing.B) {
	s := benchStore(b)
	b.ResetTimer()
	for b.Loop() {
		cycle(b, s, "r")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkTaskCycleParallel: 16 goroutines per CPU run cycles at once;
// their writes share commits.
func BenchmarkTaskCycleParallel(b *testing.B) {
	s := benchStore(b)
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		runner := fmt.Sprintf("r%d", n.Add(1))
		for pb.Next() {
			cycle(b, s, runner)
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

func BenchmarkEnqueueParallel(b *testing.B) {
	s := benchStore(b)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Enqueue(ctx, host.TaskIntent{TaskType: "bench", Source: "bench", Payload: json.RawMessage(`{"n":1}`)}, host.EnqueueOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

var benchValue = json.RawMessage(`{"text":"a value of about one hundred bytes, a value of about one hundred bytes, ok"}`)

func BenchmarkMemoryPut(b *testing.B) {
	s := benchStore(b)
	sc := host.Scope{Tenant: "t", Namespace: "n"}
	i := 0
	for b.Loop() {
		if err := s.Put(ctx, sc, fmt.Sprintf("key-%d", i%1000), benchValue, host.PutOptions{}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkMemoryPutParallel(b *testing.B) {
	s := benchStore(b)
	sc := host.Scope{Tenant: "t", Namespace: "n"}
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := s.Put(ctx, sc, fmt.Sprintf("key-%d", n.Add(1)%1000), benchValue, host.PutOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkMemoryGet(b *testing.B) {
	s := benchStore(b)
	sc := host.Scope{Tenant: "t", Namespace: "n"}
	for i := range 1000 {
		s.Put(ctx, sc, fmt.Sprintf("key-%d", i), benchValue, host.PutOptions{})
	}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Get(ctx, sc, fmt.Sprintf("key-%d", i%1000)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkMemoryPutSecret: Put of a secret value, which is sealed
// (AES-256-GCM) before it is written.
func BenchmarkMemoryPutSecret(b *testing.B) {
	s := benchStore(b)
	sc := host.Scope{Tenant: "t", Namespace: "n"}
	i := 0
	for b.Loop() {
		if err := s.Put(ctx, sc, fmt.Sprintf("key-%d", i%1000), benchValue, host.PutOptions{Secret: true}); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkMemoryGetSecret: repeated reads of secret values; the cache
// keeps their plaintext, so only the first read of each opens it.
func BenchmarkMemoryGetSecret(b *testing.B) {
	s := benchStore(b)
	sc := host.Scope{Tenant: "t", Namespace: "n"}
	for i := range 1000 {
		s.Put(ctx, sc, fmt.Sprintf("key-%d", i), benchValue, host.PutOptions{Secret: true})
	}
	i := 0
	b.ResetTimer()
	for b.Loop() {
		if _, err := s.Get(ctx, sc, fmt.Sprintf("key-%d", i%1000)); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

func BenchmarkMemoryGetParallel(b *testing.B) {
	s := benchStore(b)
	sc := host.Scope{Tenant: "t", Namespace: "n"}
	for i := range 1000 {
		s.Put(ctx, sc, fmt.Sprintf("key-%d", i), benchValue, host.PutOptions{})
	}
	var n atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.Get(ctx, sc, fmt.Sprintf("key-%d", n.Add(1)%1000)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkVerifyChain(b *testing.B) {
	s := benchStore(b)
	for range 1000 {
		cycle(b, s, "r")
	}
	b.ResetTimer()
	for b.Loop() {
		rep, err := s.VerifyChain(ctx)
		if err != nil || !rep.OK {
			b.Fatal(err, rep)
		}
	}
	b.ReportMetric(4000, "events/op")
}

// helloAttempt is an attempt the size of the C hello node's (≈ 900 bytes
// as JSON): what BenchmarkEvidenceCost in internal/dispatch records.
func helloAttempt() *host.Attempt {
	now := time.Now()
	return &host.Attempt{RunnerID: "packrun-bench", Pack: "local.hello.c@1.0.0", ModuleSHA256: "c986462a2c268d7fa0873b694d0c2c93a54ca4b818b48b59f9a86c87540b31f8",
		Node: "example.hello", RunID: "6469348fef4f148e16569a5f177c5f01", ABIVersion: "1", Outcome: abi.Completed,
		Input: json.RawMessage(`{"name":"bench"}`), Output: json.RawMessage(`{"greeting":"Hello, bench!"}`),
		Logs:        json.RawMessage(`[{"level":"info","message":"hello invoked"}]`),
		Trace:       json.RawMessage(`[{"fn":"openwop.openwop_log","args":"AmhlbGxvIGludm9rZWQ="}]`),
		Limits:      json.RawMessage(`{"memoryBytes":134217728,"timeoutMs":30000,"outputBytes":16777216,"hostCalls":1000000,"captureBytes":1048576}`),
		Diagnostics: json.RawMessage(`{"hostCalls":1,"memoryBytes":131072}`),
		StartedAt:   now, EndedAt: now.Add(30 * time.Microsecond)}
}

// BenchmarkRecordAttemptParallel: the store's side of an attempt with full
// evidence (validate, hash, chain, insert, durable commit), 32 callers per
// CPU; the ceiling the writer puts on BenchmarkEvidenceCost. "round-trip"
// validates and hashes the attempt the same way and then waits for a
// commit of the writer without storing anything: the floor of any design
// in which the caller waits for its evidence to be durable.
func BenchmarkRecordAttemptParallel(b *testing.B) {
	for _, mode := range []string{"store", "round-trip"} {
		b.Run(mode, func(b *testing.B) {
			s := benchStore(b)
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					var err error
					if mode == "store" {
						err = s.RecordAttempt(ctx, helloAttempt())
					} else if _, err = s.prepareAttempt(helloAttempt()); err == nil {
						err = s.w.do(ctx, func(*wtx) error { return nil })
					}
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
		})
	}
}

// BenchmarkRecordAttemptLatency: how long a caller waits for its attempt to
// be durable, with 64 callers recording without pause: the median, the
// 99th and 99.9th percentiles and the worst. Run it long enough to cross
// a few WAL checkpoints (one per ≈ 30 000 attempts), e.g.
// -benchtime 150000x.
func BenchmarkRecordAttemptLatency(b *testing.B) {
	s := benchStore(b)
	const callers = 64
	lat := make([][]time.Duration, callers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for c := range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if err := s.RecordAttempt(ctx, helloAttempt()); err != nil {
					b.Error(err)
					return
				}
				lat[c] = append(lat[c], time.Since(t0))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	all := slices.Concat(lat...)
	slices.Sort(all)
	at := func(q float64) float64 {
		return float64(all[min(len(all)-1, int(q*float64(len(all))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), "p50-ms")
	b.ReportMetric(at(0.99), "p99-ms")
	b.ReportMetric(at(0.999), "p99.9-ms")
	b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "attempts/s")
}

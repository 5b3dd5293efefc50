package sqlite

import (
	"encoding/json"
	"fmt"
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

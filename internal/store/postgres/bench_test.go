package postgres

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/pgtest"
)

// The figures in RATIONALE.md ("PostgreSQL (issue 18)") come from
//
//	PGTEST_DURABLE=1 go test ./internal/store/postgres -run '^$' -bench . -benchtime 3s
//
// PGTEST_DURABLE=1 keeps fsync on: every commit waits for its WAL flush,
// as on a production server (synchronous_commit stays on either way).

func benchStore(b *testing.B) *Store {
	s, err := Open(ctx, pgtest.DSN(b), benchOptions(b, 32))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchOptions are a node's options as `packrun serve` opens the store:
// with its own signed head checkpoint file.
func benchOptions(b *testing.B, conns int32) Options {
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	return Options{MaxConns: conns, HostKey: key, CheckpointFile: filepath.Join(b.TempDir(), "evidence-head.json")}
}

// cycle runs one task through the queue the way the dispatcher does:
// enqueue, claim, then record the attempt and settle in one Finish, each
// step one committed transaction.
func cycle(b *testing.B, s *Store, runner string) {
	if _, err := s.Enqueue(ctx, host.TaskIntent{TaskType: "bench", Source: "bench", Payload: json.RawMessage(`{"n":1}`)}, host.EnqueueOptions{}); err != nil {
		b.Fatal(err)
	}
	// Under READ COMMITTED a claim may find the queue empty while tasks
	// are enqueued: the tasks its snapshot saw were claimed by others
	// since, the ones enqueued since are not in it. The dispatcher polls
	// again; so does the benchmark.
	task, err := s.Claim(ctx, runner, time.Time{})
	for errors.Is(err, host.ErrEmpty) {
		task, err = s.Claim(ctx, runner, time.Time{})
	}
	if err != nil {
		b.Fatal(err)
	}
	a := &host.Attempt{TaskID: task.TaskID, RunnerID: runner, Attempt: task.AttemptCount, Pack: "local.bench@1.0.0", Node: "bench", Outcome: abi.Completed,
		Input: task.Payload, Output: json.RawMessage(`{"ok":true}`), Trace: json.RawMessage(`[{"fn":"openwop_now_ms","result":1}]`)}
	if _, err := s.Finish(ctx, task.TaskID, host.FinishInput{Record: a, Claimed: task, Outcome: host.TaskOutcome{MachineStatus: host.MachineOK}}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkTaskCycle: one dispatcher goroutine, tasks one after another.
func BenchmarkTaskCycle(b *testing.B) {
	s := benchStore(b)
	for b.Loop() {
		cycle(b, s, "r")
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
}

// BenchmarkTaskCycleParallel: as internal/store/sqlite's, 16 goroutines per CPU
// run cycles at once (on one pool of 32 connections).
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

// BenchmarkChainAppendParallel: events appended from many transactions
// at once, each taking the chain lock in turn: the ceiling of the one
// chain across nodes.
func BenchmarkChainAppendParallel(b *testing.B) {
	s := benchStore(b)
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := s.AppendEvent(ctx, host.Event{Type: "bench", Data: json.RawMessage(`{"n":1}`)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkChainAppend: one append after another (the round trips of
// one transaction: lock, head, insert, commit).
func BenchmarkChainAppend(b *testing.B) {
	s := benchStore(b)
	for b.Loop() {
		if _, err := s.AppendEvent(ctx, host.Event{Type: "bench", Data: json.RawMessage(`{"n":1}`)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// BenchmarkTaskCycleNodes: the task round trip (enqueue, claim, settle
// with its attempt recorded: a durable attempt) with 1, 2 and 3 nodes —
// Stores, each with its own pool of 16 connections, as separate `packrun
// serve` processes have — on one database, 32 goroutines spread over
// them. The nodes share this machine's 2 cores with the server, so the
// figures show the database's ceiling rather than added capacity
// (RATIONALE.md, "PostgreSQL (issue 18)", the model).
func BenchmarkTaskCycleNodes(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			dsn := pgtest.DSN(b)
			stores := make([]*Store, n)
			for i := range stores {
				s, err := Open(ctx, dsn, benchOptions(b, 16))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { s.Close() })
				stores[i] = s
			}
			var g atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(g.Add(1))
				s, runner := stores[i%n], fmt.Sprintf("node%d-r%d", i%n, i)
				for pb.Next() {
					cycle(b, s, runner)
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tasks/s")
		})
	}
}

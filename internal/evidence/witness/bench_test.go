package witness

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU adds cpu-ns/op, steadier than ns/op on a shared machine (the
// fsync wait is wall time, not CPU).
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

// BenchmarkAddCheckpoint is one add-checkpoint request through the
// witness (no HTTP): parse, the log's signature, a consistency proof from
// the last size, the durable state write, the cosignature.
func BenchmarkAddCheckpoint(b *testing.B) {
	l := newTestLog(b, "example.com/bench")
	l.grow(uint64(b.N)+1, "a")
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = l.body(uint64(i), uint64(i)+1)
	}
	w, _ := newTestWitness(b, l)
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if _, err := w.Add(bodies[i]); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

// BenchmarkAnchorDurableWrite, the anchor of the write: writeFileDurably
// of a checkpoint-sized file alone (temp file, fsync, rename, fsync dir).
func BenchmarkAnchorDurableWrite(b *testing.B) {
	p := filepath.Join(b.TempDir(), "state")
	data := []byte("example.com/bench\n12345\nAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n")
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if err := writeFileDurably(p, data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

// BenchmarkAnchorVerifyCosign, the anchor of the cryptography: the log's
// signature checked and the cosignature made (one Ed25519 verify and one
// sign), no proof and no write.
func BenchmarkAnchorVerifyCosign(b *testing.B) {
	l := newTestLog(b, "example.com/bench").grow(1000, "a")
	cp := l.checkpoint(1000)
	w, _ := newTestWitness(b, l)
	lc := l.logConfig()
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		_, n, err := OpenCheckpoint(cp, lc)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Key().Cosign(n.Text); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

// BenchmarkPublish is one checkpoint through serve --witness's
// Publisher: the proof from the last cosigned size, the HTTP round trip
// to an in-process witness (which does what BenchmarkAddCheckpoint does),
// the cosignature checked, the state file written durably. cpu-ns/op
// counts both sides (one process).
func BenchmarkPublish(b *testing.B) {
	l := newTestLog(b, "example.com/bench")
	l.grow(uint64(b.N)+1, "a")
	w, _ := newTestWitness(b, l)
	srv := httptest.NewServer(w)
	defer srv.Close()
	src := &growingSource{l: l, size: 1}
	p, err := NewPublisher(src, []Target{{URL: srv.URL, VKey: w.Key().VKey()}}, filepath.Join(b.TempDir(), "state.json"), nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := cpuTime(b)
	for i := 0; i < b.N; i++ {
		src.size = uint64(i) + 1
		if err := p.Publish(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	reportCPU(b, start)
}

// growingSource is a testLog seen at size.
type growingSource struct {
	l    *testLog
	size uint64
}

func (s *growingSource) Checkpoint(context.Context) (uint64, []byte, []byte, error) {
	return s.size, s.l.tree.HashAt(s.size), s.l.checkpoint(s.size), nil
}

func (s *growingSource) Consistency(_ context.Context, from, to uint64) ([][]byte, error) {
	return s.l.proof(from, to), nil
}

package witness

import (
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

package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// BenchLogDelay appends b.N events to b's chain (from one goroutine, or
// from parallel goroutines per CPU when parallel > 0), waits until the
// store's own sequencer has integrated them (without LogSync), and
// reports the durable-to-provable delays of the store's entries (delays:
// the driver's LogDelays) as p50-ms and p99-ms, and appends/s.
func BenchLogDelay(b *testing.B, s host.Backend, delays func() []time.Duration, parallel int) {
	b.Helper()
	var head atomic.Int64 // the highest seq appended
	last := func(e *host.Event) {
		for {
			h := head.Load()
			if e.Seq <= h || head.CompareAndSwap(h, e.Seq) {
				return
			}
		}
	}
	if _, err := s.LogSync(ctx); err != nil && !isNotFound(err) {
		b.Fatal(err)
	}
	delays()
	start := time.Now()
	b.ResetTimer()
	if parallel > 0 {
		b.SetParallelism(parallel)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e, err := s.AppendEvent(ctx, host.Event{Type: "custom.note"})
				if err != nil {
					b.Error(err)
					return
				}
				last(e)
			}
		})
	} else {
		for i := range b.N {
			e, err := s.AppendEvent(ctx, host.Event{Type: "custom.note", TaskID: fmt.Sprint(i)})
			if err != nil {
				b.Fatal(err)
			}
			last(e)
		}
	}
	took := time.Since(start)
	// Wait for the sequencer (never LogSync: it would integrate for it).
	for deadline := time.Now().Add(30 * time.Second); ; {
		cp, err := s.LogCheckpoint(ctx, 0)
		if err == nil && cp.Size >= uint64(head.Load()) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the log did not integrate entry %d within 30 s: %+v %v", head.Load(), cp, err)
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	// The sequencer records the delays after its commit shows: LogSync
	// waits for it (and finds nothing left to integrate).
	if _, err := s.LogSync(ctx); err != nil {
		b.Fatal(err)
	}
	d := delays()
	if len(d) == 0 {
		b.Fatal("no integration delay was measured")
	}
	slices.Sort(d)
	q := func(p float64) float64 { return float64(d[int(p*float64(len(d)-1))]) / float64(time.Millisecond) }
	b.ReportMetric(q(0.50), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(float64(b.N)/took.Seconds(), "appends/s")
}

func isNotFound(err error) bool { return errors.Is(err, host.ErrNotFound) }

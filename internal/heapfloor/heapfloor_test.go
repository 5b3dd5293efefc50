package heapfloor

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
)

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestRaiseLeavesATunedCollectorAlone(t *testing.T) {
	t.Setenv("GOGC", "200")
	if Raise(1 << 20) {
		t.Fatal("Raise set a floor although GOGC is set")
	}
}

func TestRaiseLiftsTheHeapGoal(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	once, floor = sync.Once{}, nil // as in a fresh process
	t.Cleanup(func() { floor = nil })
	const n = 48 << 20
	runtime.GC()
	if g := heapGoal(); g >= n {
		t.Fatalf("heap goal %d before the floor: the test needs a smaller heap", g)
	}
	if !Raise(n) {
		t.Fatal("Raise did not set the floor")
	}
	runtime.GC()
	// The floor counts as live, so the next cycle starts only once the
	// heap has grown past it (by GOGC percent: twice it at the default).
	if g := heapGoal(); g < n {
		t.Fatalf("heap goal %d after a %d-byte floor", g, n)
	}
	if Raise(2 * n) {
		t.Fatal("a second Raise set the floor again")
	}
	if len(floor) != n {
		t.Fatalf("floor is %d bytes, want %d", len(floor), n)
	}
}

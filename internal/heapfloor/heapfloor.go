// Package heapfloor keeps Go's garbage collector from pacing itself
// against a tiny heap.
//
// The collector starts a cycle when the heap has grown by GOGC percent
// over what the last cycle found live. A process that runs thousands of
// short invocations a second keeps little alive (a few MiB) while
// allocating tens of KiB per invocation, most of it in wazero's per-instance
// call stacks, so it collects a hundred times a second and each cycle's fixed
// costs (scanning every goroutine's stack, shrinking the stacks of those
// parked on a commit, then growing them again) become a fifth of its CPU.
//
// Raise adds an allocation that is never touched: the collector counts it as
// live, so cycles come once per floor's worth of allocation instead, while
// the operating system never backs its pages. What it costs is garbage: the
// heap may hold up to the floor's size in dead objects between cycles.
package heapfloor

import (
	"os"
	"sync"
)

var (
	once  sync.Once
	floor []byte // never read or written: only its size matters
)

// Raise sets the floor to n bytes; only the first call in a process has an
// effect. It does nothing when the environment sets GOGC or GOMEMLIMIT: an
// operator who tunes the collector keeps control of it. Raise reports
// whether it set the floor.
func Raise(n int) bool {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" || n <= 0 {
		return false
	}
	set := false
	once.Do(func() {
		floor = make([]byte, n)
		set = true
	})
	return set
}

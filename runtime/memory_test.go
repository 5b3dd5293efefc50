package runtime

import (
	"bytes"
	"testing"
)

// A recycled buffer reaches the next instance zeroed over its whole
// capacity, whatever the previous instance wrote; a buffer the instance
// outgrew is not recycled at all.
func TestLinearMemoryRecycledZeroed(t *testing.T) {
	const capacity = 3 * 65536 // a size no other test's module uses
	mod := &Module{limits: Limits{MemoryBytes: 1 << 20}}
	dirty := func() *linearMemory {
		st := &instState{m: mod}
		m := st.Allocate(capacity, 0).(*linearMemory)
		b := m.Reallocate(2 * 65536)
		for i := range b {
			b[i] = 0xAB
		}
		return m
	}
	m := dirty()
	first := m.first
	m.recycle()
	if m.buf != nil || m.first != nil {
		t.Fatal("recycle left the memory holding its buffer")
	}
	// sync.Pool may drop what it holds at any time, so look at every
	// buffer of this capacity until the recycled one comes back (or not).
	for i := 0; i < 4; i++ {
		st := &instState{m: mod}
		got := st.Allocate(capacity, 0).(*linearMemory)
		full := got.buf[:cap(got.buf)]
		if len(got.buf) != 0 || cap(got.buf) != capacity {
			t.Fatalf("len %d cap %d, want 0 and %d", len(got.buf), cap(got.buf), capacity)
		}
		if !bytes.Equal(full, make([]byte, capacity)) {
			t.Fatalf("a recycled buffer was handed out with non-zero bytes")
		}
		if &full[0] == &first[:1][0] {
			break
		}
	}

	// Grown past its first buffer: the first buffer's bytes were exposed up
	// to its capacity and then copied; it must not be recycled dirty.
	st := &instState{m: mod}
	g := st.Allocate(capacity, 0).(*linearMemory)
	small := g.Reallocate(capacity)
	for i := range small {
		small[i] = 0xCD
	}
	g.Reallocate(capacity + 65536)
	g.recycle()
	for i := 0; i < 4; i++ {
		st := &instState{m: mod}
		got := st.Allocate(capacity, 0).(*linearMemory)
		if !bytes.Equal(got.buf[:cap(got.buf)], make([]byte, capacity)) {
			t.Fatalf("a buffer outgrown by its instance came back dirty")
		}
	}
}

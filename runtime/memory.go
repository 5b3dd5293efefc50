package runtime

import (
	"github.com/tetratelabs/wazero/experimental"

	"github.com/packrun/packrun/abi"
)

// linearMemory backs one instance's Wasm memory. It is wazero's
// experimental.LinearMemory: every memory.grow reaches Reallocate, so the
// per-module limit is enforced here and a refused grow becomes a
// cap.breached event instead of a silent -1.
type linearMemory struct {
	buf   []byte
	peak  uint64 // largest size reached; survives Free for reporting
	limit uint64
	st    *instState
}

// Allocate implements experimental.MemoryAllocator for instState.
func (st *instState) Allocate(capacity, _ uint64) experimental.LinearMemory {
	m := &linearMemory{limit: st.m.limits.MemoryBytes, st: st}
	m.buf = make([]byte, 0, min(capacity, m.limit))
	st.mem = m
	return m
}

func (m *linearMemory) Reallocate(size uint64) []byte {
	if size > m.limit {
		if a := m.st.act; a != nil {
			a.hit(Event{Type: EventCapBreached, Kind: abi.CapMemory, Limit: int64(m.limit), Observed: int64(size)})
		}
		return nil
	}
	m.peak = max(m.peak, size)
	if size <= uint64(cap(m.buf)) {
		// Memory never shrinks, so bytes between the old length and the
		// capacity were never exposed and are still zero.
		m.buf = m.buf[:size]
		return m.buf
	}
	newCap := max(size, min(2*uint64(cap(m.buf)), m.limit))
	nb := make([]byte, size, newCap)
	copy(nb, m.buf)
	m.buf = nb
	return nb
}

func (m *linearMemory) Free() { m.buf = nil }

package runtime

import (
	"sync"

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
	// first is the buffer Allocate handed out, kept so that recycle can
	// return it (zeroed) to the free buffers once no guest code can run.
	first []byte
}

// Allocate implements experimental.MemoryAllocator for instState.
func (st *instState) Allocate(capacity, _ uint64) experimental.LinearMemory {
	m := &linearMemory{limit: st.m.limits.MemoryBytes, st: st}
	m.buf = freeBuffers.get(min(capacity, m.limit))
	m.first = m.buf
	st.mem = m
	return m
}

// recycle returns the memory's first buffer to freeBuffers. Only the host
// calls it, after the instance is closed and none of its guest calls is
// running: wazero frees a memory as soon as the module is closed, which a
// breach does from inside a host function, while guest code is still on
// the stack and may write to it.
func (m *linearMemory) recycle() {
	b := m.first
	m.first, m.buf = nil, nil
	if b == nil {
		return
	}
	// Memory never shrinks, so the bytes this instance exposed are
	// b[:peak] (an instance that outgrew b dropped it in Reallocate).
	clear(b[:m.peak])
	freeBuffers.put(b[:0])
}

// freeBuffers keeps zeroed linear-memory buffers by capacity for the next
// instance of the same module: a fresh instance per invocation would
// otherwise allocate (and the GC reclaim) its whole initial memory every
// time, which at thousands of invocations a second made the collector the
// busiest thing in the process. sync.Pool empties itself across GC cycles,
// so idle buffers do not pin memory.
var freeBuffers bufferPools

type bufferPools struct{ m sync.Map } // capacity -> *sync.Pool of *[]byte

func (p *bufferPools) get(capacity uint64) []byte {
	if v, ok := p.m.Load(capacity); ok {
		if b, ok := v.(*sync.Pool).Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, 0, capacity)
}

func (p *bufferPools) put(b []byte) {
	v, _ := p.m.LoadOrStore(uint64(cap(b)), new(sync.Pool))
	v.(*sync.Pool).Put(&b)
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
	// The first buffer is outgrown: it is not recycled (see recycle), and
	// holding it would pin it for the instance's life.
	m.first = nil
	return nb
}

func (m *linearMemory) Free() { m.buf = nil }

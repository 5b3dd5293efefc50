//go:build unix

package sqlite

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// memGen is the memory generation: a counter every process that opens the
// database shares through a small memory-mapped file beside it
// (<database>-memgen), so that reading it is one atomic load. See memCache.
type memGen struct {
	p *atomic.Uint64
}

// openMemGen maps path's counter, creating the file if needed. A database
// without a file of its own (":memory:") gets a process-local counter.
func openMemGen(dbPath string) (memGen, error) {
	if dbPath == "" || dbPath == ":memory:" {
		return memGen{p: new(atomic.Uint64)}, nil
	}
	path := dbPath + "-memgen"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return memGen{}, fmt.Errorf("memory generation: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	const size = 8
	if fi, err := f.Stat(); err != nil {
		return memGen{}, fmt.Errorf("memory generation: %w", err)
	} else if fi.Size() < size {
		if err := f.Truncate(size); err != nil {
			return memGen{}, fmt.Errorf("memory generation: %w", err)
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return memGen{}, fmt.Errorf("memory generation: map %s: %w", path, err)
	}
	// A mapping starts on a page boundary, so the counter is aligned for
	// atomic access, which is atomic across processes sharing the page.
	g := memGen{p: (*atomic.Uint64)(unsafe.Pointer(&mem[0]))}
	// A process that opens the store may follow one that died between a
	// commit and its second bump: start everyone afresh.
	g.bump()
	return g, nil
}

func (g memGen) load() uint64 { return g.p.Load() }
func (g memGen) bump()        { g.p.Add(1) }

// close leaves the mapping in place for the life of the process (one
// page per Open): a read racing Close must find the counter, not a fault.
func (g memGen) close() {}

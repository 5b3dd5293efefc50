//go:build unix

package sqlite

import (
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// gen is a generation: a counter every process that opens the database
// shares through a small memory-mapped file beside it (<database>-memgen),
// so that reading it is one atomic load. Writes of what a cache holds bump
// it; see memCache and routeCache.
type gen struct {
	p *atomic.Uint64
}

// gens are the store's generations, one per cached kind of data, at fixed
// places in the file: memory at 0 (the file held only that one at first),
// routes at 8, packs at 16 (installed packs: see Store.PacksGeneration).
// A shorter file, of an older packrun, is extended.
type gens struct {
	memory, routes, packs gen
}

func localGens() gens {
	return gens{memory: gen{p: new(atomic.Uint64)}, routes: gen{p: new(atomic.Uint64)}, packs: gen{p: new(atomic.Uint64)}}
}

// openGens maps path's counters, creating or extending the file if
// needed. A database without a file of its own (":memory:") gets
// process-local counters.
func openGens(dbPath string) (gens, error) {
	if dbPath == "" || dbPath == ":memory:" {
		return localGens(), nil
	}
	path := dbPath + "-memgen"
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return gens{}, fmt.Errorf("store generations: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	const size = 24
	if fi, err := f.Stat(); err != nil {
		return gens{}, fmt.Errorf("store generations: %w", err)
	} else if fi.Size() < size {
		if err := f.Truncate(size); err != nil {
			return gens{}, fmt.Errorf("store generations: %w", err)
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return gens{}, fmt.Errorf("store generations: map %s: %w", path, err)
	}
	// A mapping starts on a page boundary, so the counters are aligned for
	// atomic access, which is atomic across processes sharing the page.
	g := gens{
		memory: gen{p: (*atomic.Uint64)(unsafe.Pointer(&mem[0]))},
		routes: gen{p: (*atomic.Uint64)(unsafe.Pointer(&mem[8]))},
		packs:  gen{p: (*atomic.Uint64)(unsafe.Pointer(&mem[16]))},
	}
	// A process that opens the store may follow one that died between a
	// commit and its second bump: start everyone afresh.
	g.memory.bump()
	g.routes.bump()
	g.packs.bump()
	return g, nil
}

func (g gen) load() uint64 { return g.p.Load() }
func (g gen) bump()        { g.p.Add(1) }

// close leaves the mapping in place for the life of the process (one
// page per Open): a read racing Close must find the counters, not a fault.
func (g gens) close() {}

//go:build !unix

package sqlite

import "sync/atomic"

// gen without shared memory: a process-local counter, so the caches are
// coherent within this process only and see other processes' writes
// within their maxAge.
type gen struct{ p *atomic.Uint64 }

type gens struct{ memory, routes, packs gen }

func openGens(string) (gens, error) {
	return gens{memory: gen{p: new(atomic.Uint64)}, routes: gen{p: new(atomic.Uint64)}, packs: gen{p: new(atomic.Uint64)}}, nil
}
func (g gen) load() uint64 { return g.p.Load() }
func (g gen) bump()        { g.p.Add(1) }
func (g gens) close()      {}

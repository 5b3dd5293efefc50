//go:build !unix

package sqlite

import "sync/atomic"

// memGen without shared memory: a process-local counter, so the memory
// cache is coherent within this process only and sees other processes'
// writes within its maxAge.
type memGen struct{ p *atomic.Uint64 }

func openMemGen(string) (memGen, error) { return memGen{p: new(atomic.Uint64)}, nil }
func (g memGen) load() uint64           { return g.p.Load() }
func (g memGen) bump()                  { g.p.Add(1) }
func (g memGen) close()                 {}

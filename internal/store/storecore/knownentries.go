package storecore

import (
	"cmp"
	"slices"
	"sync"
)

// KnownEntry is a chain entry's place and hash.
type KnownEntry struct {
	Seq  int64
	Hash string
}

// maxKnown bounds KnownEntries: past it (the log not integrating, its
// key refused) the oldest entries are dropped, and read back from the
// tables when their turn comes.
const maxKnown = 1 << 14

// KnownEntries holds chain entries a store placed itself and committed,
// in seq order, so that its sequencer integrates them without reading
// them back (IntegrateLog's known): SQLite's writer adds what each
// transaction appended once its COMMIT succeeded; a PostgreSQL node what
// its own writers and link passes placed. Entries another process or
// node placed are gaps in it, read from the tables. The zero value is
// ready; it is safe for concurrent use.
type KnownEntries struct {
	mu sync.Mutex
	e  []KnownEntry
}

// Add records committed entries (in any order; a place already held is
// not added twice), keeping the newest maxKnown.
func (k *KnownEntries) Add(es ...KnownEntry) {
	if len(es) == 0 {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, e := range es {
		n := len(k.e)
		if n == 0 || k.e[n-1].Seq < e.Seq { // the usual case: after the last
			k.e = append(k.e, e)
			continue
		}
		i, found := slices.BinarySearchFunc(k.e, e.Seq, func(a KnownEntry, seq int64) int { return cmp.Compare(a.Seq, seq) })
		if !found {
			k.e = slices.Insert(k.e, i, e)
		}
	}
	if over := len(k.e) - maxKnown; over > 0 {
		k.e = slices.Delete(k.e, 0, over)
	}
}

// From returns the hashes of the entries next, next+1, ... it holds in a
// row, at most max (none when it does not hold next), and lets go of
// those before next (integrated).
func (k *KnownEntries) From(next int64, max int) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.dropLocked(next - 1)
	var out []string
	for j, e := range k.e {
		if j == max || e.Seq != next+int64(j) {
			break
		}
		out = append(out, e.Hash)
	}
	return out
}

// Drop lets go of the entries up to seq through (integrated).
func (k *KnownEntries) Drop(through int64) {
	k.mu.Lock()
	k.dropLocked(through)
	k.mu.Unlock()
}

func (k *KnownEntries) dropLocked(through int64) {
	i := 0
	for i < len(k.e) && k.e[i].Seq <= through {
		i++
	}
	k.e = k.e[i:]
}

// Held lists the entries held, in seq order (for tests and diagnostics).
func (k *KnownEntries) Held() []KnownEntry {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.e)
}

package sqlite

import (
	"sync"
	"time"
)

// genCache is a map of what reads found, kept coherent across every
// process that opens the database by one shared counter, a generation (see
// gen), which each write of the cached data bumps twice: inside its write
// transaction, before the commit, and again once the transaction is over
// (wtx.touch). A reader notes the generation before it queries (lookup)
// and caches what it read only if the generation has not moved meanwhile
// (store); every lookup first compares the cache's generation with the
// current one and drops the whole cache when they differ. So a value
// cached before a write's first bump is dropped at that bump, and one read
// between the two bumps is dropped at the second.
//
// The one gap: a writer that dies between its commit and its second bump
// leaves values read in that window (a few milliseconds) cached elsewhere.
// maxAge bounds how long such a value can be served. Writes made with
// other tools (the sqlite3 shell) do not bump the generation either and are
// seen within maxAge.
type genCache[K comparable, V any] struct {
	gen     gen
	maxAge  time.Duration
	maxSize int            // the most size can reach; one value at most a sixteenth of it
	sizeOf  func(K, V) int // what an entry counts against maxSize

	mu      sync.Mutex
	seen    uint64 // the generation the entries were read at
	entries map[K]genEntry[V]
	size    int
}

type genEntry[V any] struct {
	v      V
	readAt time.Time
}

func newGenCache[K comparable, V any](g gen, maxSize int, sizeOf func(K, V) int) *genCache[K, V] {
	return &genCache[K, V]{gen: g, maxAge: 2 * time.Second, maxSize: maxSize, sizeOf: sizeOf, entries: map[K]genEntry[V]{}}
}

// lookup returns the cached value for k if it is still current, and the
// generation to tag a fresh read with.
func (c *genCache[K, V]) lookup(k K, now time.Time) (V, bool, uint64) {
	var zero V
	g := c.gen.load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if g != c.seen {
		c.clearLocked(g)
		return zero, false, g
	}
	e, ok := c.entries[k]
	if !ok {
		return zero, false, g
	}
	if now.Sub(e.readAt) > c.maxAge {
		delete(c.entries, k)
		c.size -= c.sizeOf(k, e.v)
		return zero, false, g
	}
	return e.v, true, g
}

// store caches what a read tagged g found at readAt, unless a write may
// have happened since g was taken.
func (c *genCache[K, V]) store(k K, v V, g uint64, readAt time.Time) {
	n := c.sizeOf(k, v)
	if n > c.maxSize/16 {
		return // one large value would crowd out the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g != c.seen || c.gen.load() != g {
		return
	}
	if old, ok := c.entries[k]; ok {
		c.size -= c.sizeOf(k, old.v)
	}
	if c.size+n > c.maxSize {
		c.clearLocked(g)
	}
	c.entries[k] = genEntry[V]{v, readAt}
	c.size += n
}

func (c *genCache[K, V]) clearLocked(g uint64) {
	clear(c.entries)
	c.size, c.seen = 0, g
}

package sqlite

import (
	"sync"
	"time"

	"github.com/packrun/packrun/host"
)

// memCache keeps memory entries read through Get so that a guest's repeated
// reads do not each cost a SQLite query (≈ 10 µs through database/sql and
// cgo, against a map lookup).
//
// Coherence across every process that opens the database rests on one
// shared counter, the memory generation (see gen), which each memory
// write bumps twice: inside its write transaction, before the commit, and
// again once the commit is over. A reader notes the generation before it
// queries and caches what it read only if the generation has not moved
// meanwhile; every lookup first compares the cache's generation with the
// current one and drops the whole cache when they differ. So a value
// cached before a write's first bump is dropped at that bump, and one read
// between the two bumps is dropped at the second.
//
// The one gap: a writer that dies between its commit and its second bump
// leaves values read in that window (a few milliseconds) cached elsewhere.
// maxAge bounds how long such a value can be served. Writes made with
// other tools (the sqlite3 shell) do not bump the generation either and are
// seen within maxAge.
type memCache struct {
	gen     gen
	maxAge  time.Duration
	maxSize int // bytes of keys and values cached, at most

	mu      sync.Mutex
	seen    uint64 // the generation the entries were read at
	entries map[memKey]*cachedEntry
	size    int
}

type memKey struct{ tenant, namespace, key string }

type cachedEntry struct {
	missing   bool // no such entry (absence is cached too)
	value     []byte
	secret    bool
	expires   string     // stored form ("" for none); compared as SQLite does
	expiresAt *time.Time // expires parsed, for the entries handed out
	updatedAt time.Time
	readAt    time.Time
}

func newMemCache(g gen) *memCache {
	return &memCache{gen: g, maxAge: 2 * time.Second, maxSize: 16 << 20, entries: map[memKey]*cachedEntry{}}
}

// lookup returns the cached entry for k if it is still current, and the
// generation to tag a fresh read with.
func (c *memCache) lookup(k memKey, now time.Time) (*cachedEntry, uint64) {
	g := c.gen.load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if g != c.seen {
		c.clearLocked(g)
		return nil, g
	}
	e := c.entries[k]
	if e != nil && now.Sub(e.readAt) > c.maxAge {
		delete(c.entries, k)
		c.size -= entrySize(k, e)
		return nil, g
	}
	return e, g
}

// store caches what a read tagged g found, unless a write may have
// happened since g was taken.
func (c *memCache) store(k memKey, e *cachedEntry, g uint64) {
	n := entrySize(k, e)
	if n > c.maxSize/16 {
		return // one large value would crowd out the rest
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g != c.seen || c.gen.load() != g {
		return
	}
	if old := c.entries[k]; old != nil {
		c.size -= entrySize(k, old)
	}
	if c.size+n > c.maxSize {
		c.clearLocked(g)
	}
	c.entries[k] = e
	c.size += n
}

func (c *memCache) clearLocked(g uint64) {
	clear(c.entries)
	c.size, c.seen = 0, g
}

func entrySize(k memKey, e *cachedEntry) int {
	return len(k.tenant) + len(k.namespace) + len(k.key) + len(e.value) + 64
}

// entry is the host.Entry a cached read answers with; its value and expiry
// are shared with the cache and must not be modified.
func (e *cachedEntry) entry(key string) *host.Entry {
	return &host.Entry{Key: key, Value: e.value, Secret: e.secret, ExpiresAt: e.expiresAt, UpdatedAt: e.updatedAt}
}

package sqlite

import (
	"time"

	"github.com/packrun/packrun/host"
)

// memCache keeps memory entries read through Get so that a guest's repeated
// reads do not each cost a SQLite query (≈ 10 µs through database/sql and
// cgo, against a map lookup). It is coherent through the memory generation
// (see genCache); absence is cached too; at most 16 MiB of keys and values.
type memCache = genCache[memKey, *cachedEntry]

type memKey struct{ tenant, namespace, key string }

type cachedEntry struct {
	missing   bool // no such entry (absence is cached too)
	value     []byte
	secret    bool
	expires   string     // stored form ("" for none); compared as SQLite does
	expiresAt *time.Time // expires parsed, for the entries handed out
	updatedAt time.Time
}

func newMemCache(g gen) *memCache { return newGenCache(g, 16<<20, entrySize) }

func entrySize(k memKey, e *cachedEntry) int {
	return len(k.tenant) + len(k.namespace) + len(k.key) + len(e.value) + 64
}

// entry is the host.Entry a cached read answers with; its value and expiry
// are shared with the cache and must not be modified.
func (e *cachedEntry) entry(key string) *host.Entry {
	return &host.Entry{Key: key, Value: e.value, Secret: e.secret, ExpiresAt: e.expiresAt, UpdatedAt: e.updatedAt}
}

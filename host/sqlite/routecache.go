package sqlite

import (
	"sync"
	"time"

	"github.com/packrun/packrun/host"
)

// routeCache keeps the task types Resolve has answered: the dispatcher
// resolves every task it runs, and a read on the pool costs a read
// transaction whose first act, after any commit by another connection, is
// to empty that connection's page cache. Routes change only when packs are
// installed or removed and when operators override them.
//
// It is kept coherent across processes the way memCache is, through the
// routes generation: every write to the route tables touches it (bumped in
// the write transaction and again after it), a lookup drops the whole
// cache when the generation moved, and a fresh answer is kept only if the
// generation did not move while it was read. maxAge bounds what a writer
// that died between its commit and its second bump can leave cached.
// Only routes found are kept: a task type nobody serves is asked again.
type routeCache struct {
	gen    gen
	maxAge time.Duration

	mu      sync.Mutex
	seen    uint64 // the generation the routes were read at
	entries map[string]cachedRoute
}

type cachedRoute struct {
	route  host.TaskTypeRoute
	readAt time.Time
}

func newRouteCache(g gen) *routeCache {
	return &routeCache{gen: g, maxAge: 2 * time.Second, entries: map[string]cachedRoute{}}
}

// lookup returns the cached route of taskType if it is still current, and
// the generation to tag a fresh read with.
func (c *routeCache) lookup(taskType string, now time.Time) (host.TaskTypeRoute, bool, uint64) {
	g := c.gen.load()
	c.mu.Lock()
	defer c.mu.Unlock()
	if g != c.seen {
		clear(c.entries)
		c.seen = g
		return host.TaskTypeRoute{}, false, g
	}
	e, ok := c.entries[taskType]
	if !ok || now.Sub(e.readAt) >= c.maxAge {
		return host.TaskTypeRoute{}, false, g
	}
	return e.route, true, g
}

// store keeps r, read at generation g, unless the generation has moved
// since. The cache is as large as the set of routed task types.
func (c *routeCache) store(taskType string, r host.TaskTypeRoute, g uint64, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if g != c.seen || c.gen.load() != g {
		return
	}
	c.entries[taskType] = cachedRoute{route: r, readAt: now}
}

package sqlite

import "github.com/packrun/packrun/host"

// routeCache keeps the task types Resolve has answered: the dispatcher
// resolves every task it runs, and a read on the pool costs a read
// transaction whose first act, after any commit by another connection, is
// to empty that connection's page cache. Routes change only when packs are
// installed or removed and when operators override them. It is coherent
// through the routes generation (see genCache), which every write to the
// route tables touches. Only routes found are kept: a task type nobody
// serves is asked again.
type routeCache = genCache[string, host.TaskTypeRoute]

// newRouteCache bounds the cache by route count, far above any real set of
// task types.
func newRouteCache(g gen) *routeCache {
	return newGenCache(g, 16<<16, func(string, host.TaskTypeRoute) int { return 1 })
}

package sqlite

import (
	"context"
	"time"

	"github.com/packrun/packrun/internal/store/storecore"
)

// The configuration tables' rules are storecore's (agents.go: Configs,
// which Store embeds), run in the writer's transaction (coreTx); their
// reads go through configCache.

// configDriver is the Store as storecore.Configs sees it.
type configDriver struct{ s *Store }

func (d configDriver) WriteConfig(ctx context.Context, fn func(storecore.Tx, time.Time) error) error {
	return d.s.w.do(ctx, func(tx *wtx) error {
		d.s.configWrite(tx)
		return fn(coreTx{d.s, tx}, d.s.now())
	})
}

func (d configDriver) ReadConfig(ctx context.Context, t storecore.ConfigTable, id string, all bool) ([]string, error) {
	return d.s.records(ctx, t, id, all)
}

// configCache keeps what Configs reads from the configuration tables,
// found or not: the dispatcher reads a task type's spec and the agents
// for every task it runs, and they change only when an operator says so.
// Keys are "<table>\x00<id>" for get (no records: not found) and
// "<table>\x00" for list. Coherent through the routes generation, which
// every write of these tables touches (configWrite; see genCache).
type configCache = genCache[string, []string]

func newConfigCache(g gen) *configCache {
	return newGenCache(g, 16<<20, func(k string, recs []string) int {
		n := len(k)
		for _, r := range recs {
			n += len(r)
		}
		return n
	})
}

// configWrite marks tx as changing the configuration tables.
func (s *Store) configWrite(tx *wtx) { tx.touch(s.gens.routes) }

// records reads the records of t under id (one, or none), or every
// record of t when all, through configCache.
func (s *Store) records(ctx context.Context, t storecore.ConfigTable, id string, all bool) ([]string, error) {
	key := t.Table + "\x00"
	if !all {
		key += id
	}
	now := time.Now()
	recs, ok, g := s.config.lookup(key, now)
	if ok {
		return recs, nil
	}
	recs, err := storecore.ConfigRecords(ctx, coreDB{s}, t, id, all)
	if err != nil {
		return nil, err
	}
	s.config.store(key, recs, g, now)
	return recs, nil
}

package postgres

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

var (
	_ host.Agents        = (*Store)(nil)
	_ host.TaskTypeSpecs = (*Store)(nil)
)

// The configuration tables' rules are storecore's (agents.go: Configs,
// which Store embeds). No read cache: every node reads what any node last
// committed (but see setupCache, which a write here makes read again).

// configDriver is the Store as storecore.Configs sees it.
type configDriver struct{ s *Store }

func (d configDriver) WriteConfig(ctx context.Context, fn func(storecore.Tx, time.Time) error) error {
	return d.s.writeConfig(ctx, func(x *tx) error { return fn(coreTx{x}, d.s.now()) })
}

func (d configDriver) ReadConfig(ctx context.Context, t storecore.ConfigTable, id string, all bool) ([]string, error) {
	return storecore.ConfigRecords(ctx, corePool{d.s.pool}, t, id, all)
}

package postgres

import (
	"context"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

var _ host.TaskTypes = (*Store)(nil)

// host.TaskTypes, as internal/store/sqlite's, events in the same transaction as
// the change. Resolve reads the database on every call (no route cache,
// unlike internal/store/sqlite's): an override set on one node routes the next
// task on every node. TaskSetup, which the dispatcher reads a claimed task's
// route from, reads again only when the configuration changed since
// (setupCache): a task claimed after the override committed is routed by it.

// SetPackTaskTypes implements host.TaskTypes. A pack's routes are set
// under a transaction-level advisory lock on the pack's name, so that two
// nodes setting them at once do not both insert.
func (s *Store) SetPackTaskTypes(ctx context.Context, pack string, routes []host.TaskTypeRoute) error {
	const op = "set pack task types"
	want, err := storecore.PackRoutes(op, pack, routes)
	if err != nil {
		return err
	}
	err = s.writeConfig(ctx, func(x *tx) error {
		_, err := storecore.SetPackTaskTypes(ctx, coreTx{x}, pack, want)
		return err
	})
	return host.Wrap(op, pack, err)
}

// SetTaskTypeOverride implements host.TaskTypes.
func (s *Store) SetTaskTypeOverride(ctx context.Context, route host.TaskTypeRoute) error {
	const op = "set task type override"
	if err := host.CheckRoute(op, &route); err != nil {
		return err
	}
	err := s.writeConfig(ctx, func(x *tx) error { return storecore.SetTaskTypeOverride(ctx, coreTx{x}, &route) })
	return host.Wrap(op, route.TaskType, err)
}

// RemoveTaskTypeOverride implements host.TaskTypes.
func (s *Store) RemoveTaskTypeOverride(ctx context.Context, taskType string) error {
	const op = "remove task type override"
	err := s.writeConfig(ctx, func(x *tx) error { return storecore.RemoveTaskTypeOverride(ctx, coreTx{x}, op, taskType) })
	return host.Wrap(op, taskType, err)
}

// Resolve implements host.TaskTypes: the operator's override, or else the
// one manifest route; none is ErrNotFound, several ErrConflict naming the
// packs.
func (s *Store) Resolve(ctx context.Context, taskType string) (host.TaskTypeRoute, error) {
	return storecore.ResolveTaskType(ctx, corePool{s.pool}, "resolve task type", taskType)
}

var _ host.TaskSetups = (*Store)(nil)

// TaskSetup implements host.TaskSetups: a task type's route, its spec
// and the agents, as of the newest configuration this node has seen (its
// latest claim, its own writes: setupCache), read again in one round trip
// only when that changed since they were read.
func (s *Store) TaskSetup(ctx context.Context, taskType string) (*host.TaskSetup, error) {
	rows, ok := s.setups.get(taskType)
	if !ok {
		var err error
		if rows, err = s.readSetup(ctx, taskType); err != nil {
			return nil, host.Wrap("resolve task type", taskType, err)
		}
	}
	return storecore.DecodeTaskSetup(taskType, rows), nil
}

// ListTaskTypes implements host.TaskTypes.
func (s *Store) ListTaskTypes(ctx context.Context) ([]host.TaskTypeRoute, error) {
	out, err := storecore.ListTaskTypes(ctx, corePool{s.pool})
	return out, host.Wrap("list task types", "", err)
}

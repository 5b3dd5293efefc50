package sqlite

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// SetPackTaskTypes implements host.TaskTypes.
func (s *Store) SetPackTaskTypes(ctx context.Context, pack string, routes []host.TaskTypeRoute) error {
	const op = "set pack task types"
	want, err := storecore.PackRoutes(op, pack, routes)
	if err != nil {
		return err
	}
	err = s.w.do(ctx, func(tx *wtx) error {
		changed, err := storecore.SetPackTaskTypes(ctx, coreTx{s, tx}, pack, want)
		if changed {
			tx.touch(s.gens.routes)
		}
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
	err := s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes)
		return storecore.SetTaskTypeOverride(ctx, coreTx{s, tx}, &route)
	})
	return host.Wrap(op, route.TaskType, err)
}

// RemoveTaskTypeOverride implements host.TaskTypes.
func (s *Store) RemoveTaskTypeOverride(ctx context.Context, taskType string) error {
	const op = "remove task type override"
	err := s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes)
		return storecore.RemoveTaskTypeOverride(ctx, coreTx{s, tx}, op, taskType)
	})
	return host.Wrap(op, taskType, err)
}

// Resolve implements host.TaskTypes. Answers come from routeCache while
// the routes are unchanged.
func (s *Store) Resolve(ctx context.Context, taskType string) (host.TaskTypeRoute, error) {
	now := time.Now()
	r, ok, g := s.routes.lookup(taskType, now)
	if ok {
		return r, nil
	}
	r, err := s.resolve(ctx, taskType)
	if err == nil {
		s.routes.store(taskType, r, g, now)
	}
	return r, err
}

func (s *Store) resolve(ctx context.Context, taskType string) (host.TaskTypeRoute, error) {
	return storecore.ResolveTaskType(ctx, coreDB{s}, "resolve task type", taskType)
}

// ListTaskTypes implements host.TaskTypes.
func (s *Store) ListTaskTypes(ctx context.Context) ([]host.TaskTypeRoute, error) {
	out, err := storecore.ListTaskTypes(ctx, coreDB{s})
	return out, host.Wrap("list task types", "", err)
}

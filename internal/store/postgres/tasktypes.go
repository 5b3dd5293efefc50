package postgres

import (
	"context"
	"encoding/json"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

var _ host.TaskTypes = (*Store)(nil)

// host.TaskTypes, as internal/store/sqlite's, events in the same transaction as
// the change. Resolve reads the database on every call (no route cache,
// unlike internal/store/sqlite's): an override set on one node routes the next
// task on every node.

func scanRoute(row pgx.Row, origin string) (host.TaskTypeRoute, error) {
	var r host.TaskTypeRoute
	var spec string
	if err := row.Scan(&r.TaskType, &r.Pack, &r.Node, &spec); err != nil {
		return r, err
	}
	json.Unmarshal([]byte(spec), &r.TaskTypeSpec)
	r.Origin = origin
	return r, nil
}

// routesOf reads rows of task_type_routes or task_type_overrides.
func routesOf(rows pgx.Rows, err error, origin string) ([]host.TaskTypeRoute, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (host.TaskTypeRoute, error) { return scanRoute(r, origin) })
}

// SetPackTaskTypes implements host.TaskTypes. A pack's routes are set
// under a transaction-level advisory lock on the pack's name, so that two
// nodes setting them at once do not both insert.
func (s *Store) SetPackTaskTypes(ctx context.Context, pack string, routes []host.TaskTypeRoute) error {
	const op = "set pack task types"
	want, err := storecore.PackRoutes(op, pack, routes)
	if err != nil {
		return err
	}
	err = s.write(ctx, func(x *tx) error {
		if _, err := x.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 2))`, pack); err != nil {
			return err
		}
		rows, err := x.Query(ctx, `SELECT task_type, pack, node, spec FROM task_type_routes WHERE pack = $1`, pack)
		have, err := routesOf(rows, err, host.OriginManifest)
		if err != nil {
			return err
		}
		if storecore.SameRoutes(have, want) {
			return nil
		}
		if _, err := x.Exec(ctx, `DELETE FROM task_type_routes WHERE pack = $1`, pack); err != nil {
			return err
		}
		types := []string{}
		for t, r := range want {
			if _, err := x.Exec(ctx, `INSERT INTO task_type_routes (task_type, pack, node, spec) VALUES ($1, $2, $3, $4)`, t, pack, r.Node, storecore.RouteSpec(&r)); err != nil {
				return err
			}
			types = append(types, t)
		}
		sort.Strings(types)
		_, err = x.event(host.EventTaskTypesUpdated, "", "", map[string]any{"pack": pack, "task_types": types})
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
	err := s.write(ctx, func(x *tx) error {
		if _, err := x.Exec(ctx, `INSERT INTO task_type_overrides (task_type, pack, node, spec) VALUES ($1, $2, $3, $4)
			ON CONFLICT (task_type) DO UPDATE SET pack = excluded.pack, node = excluded.node, spec = excluded.spec`,
			route.TaskType, route.Pack, route.Node, storecore.RouteSpec(&route)); err != nil {
			return err
		}
		_, err := x.event(host.EventTaskTypeOverrideSet, "", "", map[string]any{"task_type": route.TaskType, "pack": route.Pack, "node": route.Node})
		return err
	})
	return host.Wrap(op, route.TaskType, err)
}

// RemoveTaskTypeOverride implements host.TaskTypes.
func (s *Store) RemoveTaskTypeOverride(ctx context.Context, taskType string) error {
	const op = "remove task type override"
	err := s.write(ctx, func(x *tx) error {
		tag, err := x.Exec(ctx, `DELETE FROM task_type_overrides WHERE task_type = $1`, taskType)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return host.Errorf(op, taskType, host.ErrNotFound, "")
		}
		_, err = x.event(host.EventTaskTypeOverrideUnset, "", "", map[string]any{"task_type": taskType})
		return err
	})
	return host.Wrap(op, taskType, err)
}

// Resolve implements host.TaskTypes: the operator's override, or else the
// one manifest route; none is ErrNotFound, several ErrConflict naming the
// packs.
func (s *Store) Resolve(ctx context.Context, taskType string) (host.TaskTypeRoute, error) {
	const op = "resolve task type"
	var r host.TaskTypeRoute
	// One statement: the override (at most one, listed first) and every
	// manifest route.
	rows, err := s.pool.Query(ctx, `SELECT task_type, pack, node, spec, true FROM task_type_overrides WHERE task_type = $1
		UNION ALL SELECT task_type, pack, node, spec, false FROM task_type_routes WHERE task_type = $1
		ORDER BY 5 DESC, 2`, taskType)
	if err != nil {
		return r, host.Wrap(op, taskType, err)
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (host.TaskTypeRoute, error) {
		var r host.TaskTypeRoute
		var spec string
		var override bool
		err := row.Scan(&r.TaskType, &r.Pack, &r.Node, &spec, &override)
		json.Unmarshal([]byte(spec), &r.TaskTypeSpec)
		r.Origin = host.OriginManifest
		if override {
			r.Origin = host.OriginOperator
		}
		return r, err
	})
	if err != nil {
		return r, host.Wrap(op, taskType, err)
	}
	return storecore.Resolve(op, taskType, found)
}

// ListTaskTypes implements host.TaskTypes.
func (s *Store) ListTaskTypes(ctx context.Context) ([]host.TaskTypeRoute, error) {
	const op = "list task types"
	var out []host.TaskTypeRoute
	for _, src := range []struct{ table, origin string }{{"task_type_overrides", host.OriginOperator}, {"task_type_routes", host.OriginManifest}} {
		rows, err := s.pool.Query(ctx, `SELECT task_type, pack, node, spec FROM `+src.table)
		routes, err := routesOf(rows, err, src.origin)
		if err != nil {
			return nil, host.Wrap(op, "", err)
		}
		out = append(out, routes...)
	}
	storecore.SortRoutes(out)
	return out, nil
}

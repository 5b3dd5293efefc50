package sqlite

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

func scanRoute(row interface{ Scan(...any) error }, origin string) (host.TaskTypeRoute, error) {
	var r host.TaskTypeRoute
	var taskType, spec string
	if err := row.Scan(&taskType, &r.Pack, &r.Node, &spec); err != nil {
		return r, err
	}
	json.Unmarshal([]byte(spec), &r.TaskTypeSpec)
	r.TaskType, r.Origin = taskType, origin
	return r, nil
}

// SetPackTaskTypes implements host.TaskTypes.
func (s *Store) SetPackTaskTypes(ctx context.Context, pack string, routes []host.TaskTypeRoute) error {
	const op = "set pack task types"
	want, err := storecore.PackRoutes(op, pack, routes)
	if err != nil {
		return err
	}
	err = s.w.do(ctx, func(tx *wtx) error {
		rows, err := tx.Query(`SELECT task_type, pack, node, spec FROM task_type_routes WHERE pack = ?`, pack)
		if err != nil {
			return err
		}
		var have []host.TaskTypeRoute
		for rows.Next() {
			r, err := scanRoute(rows, host.OriginManifest)
			if err != nil {
				rows.Close()
				return err
			}
			have = append(have, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		if storecore.SameRoutes(have, want) {
			return nil
		}
		tx.touch(s.gens.routes)
		if _, err := tx.Exec(`DELETE FROM task_type_routes WHERE pack = ?`, pack); err != nil {
			return err
		}
		types := []string{}
		for t, r := range want {
			if _, err := tx.Exec(`INSERT INTO task_type_routes (task_type, pack, node, spec) VALUES (?, ?, ?, ?)`, t, pack, r.Node, storecore.RouteSpec(&r)); err != nil {
				return err
			}
			types = append(types, t)
		}
		sort.Strings(types)
		_, err = s.event(tx, host.EventTaskTypesUpdated, "", "", map[string]any{"pack": pack, "task_types": types})
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
		if _, err := tx.Exec(`INSERT INTO task_type_overrides (task_type, pack, node, spec) VALUES (?, ?, ?, ?)
			ON CONFLICT (task_type) DO UPDATE SET pack = excluded.pack, node = excluded.node, spec = excluded.spec`,
			route.TaskType, route.Pack, route.Node, storecore.RouteSpec(&route)); err != nil {
			return err
		}
		_, err := s.event(tx, host.EventTaskTypeOverrideSet, "", "", map[string]any{"task_type": route.TaskType, "pack": route.Pack, "node": route.Node})
		return err
	})
	return host.Wrap(op, route.TaskType, err)
}

// RemoveTaskTypeOverride implements host.TaskTypes.
func (s *Store) RemoveTaskTypeOverride(ctx context.Context, taskType string) error {
	const op = "remove task type override"
	err := s.w.do(ctx, func(tx *wtx) error {
		tx.touch(s.gens.routes)
		res, err := tx.Exec(`DELETE FROM task_type_overrides WHERE task_type = ?`, taskType)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return host.Errorf(op, taskType, host.ErrNotFound, "")
		}
		_, err = s.event(tx, host.EventTaskTypeOverrideUnset, "", "", map[string]any{"task_type": taskType})
		return err
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
	const op = "resolve task type"
	// One statement: the operator's override (at most one, listed first)
	// or else every manifest route.
	rows, err := s.query(ctx, `SELECT task_type, pack, node, spec, 1 FROM task_type_overrides WHERE task_type = ?1
		UNION ALL SELECT task_type, pack, node, spec, 0 FROM task_type_routes WHERE task_type = ?1
		ORDER BY 5 DESC, 2`, taskType)
	var r host.TaskTypeRoute
	if err != nil {
		return r, host.Wrap(op, taskType, err)
	}
	defer rows.Close()
	var found []host.TaskTypeRoute
	for rows.Next() {
		var taskType, spec string
		var override bool
		if err := rows.Scan(&taskType, &r.Pack, &r.Node, &spec, &override); err != nil {
			return r, host.Wrap(op, taskType, err)
		}
		json.Unmarshal([]byte(spec), &r.TaskTypeSpec)
		r.TaskType, r.Origin = taskType, host.OriginManifest
		if override {
			r.Origin = host.OriginOperator
		}
		found = append(found, r)
		r = host.TaskTypeRoute{}
	}
	if err := rows.Err(); err != nil {
		return r, host.Wrap(op, taskType, err)
	}
	return storecore.Resolve(op, taskType, found)
}

// ListTaskTypes implements host.TaskTypes.
func (s *Store) ListTaskTypes(ctx context.Context) ([]host.TaskTypeRoute, error) {
	const op = "list task types"
	var out []host.TaskTypeRoute
	for _, src := range []struct{ table, origin string }{{"task_type_overrides", host.OriginOperator}, {"task_type_routes", host.OriginManifest}} {
		rows, err := s.db.QueryContext(ctx, `SELECT task_type, pack, node, spec FROM `+src.table)
		if err != nil {
			return nil, host.Wrap(op, "", err)
		}
		for rows.Next() {
			r, err := scanRoute(rows, src.origin)
			if err != nil {
				rows.Close()
				return nil, host.Wrap(op, "", err)
			}
			out = append(out, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, host.Wrap(op, "", err)
		}
	}
	storecore.SortRoutes(out)
	return out, nil
}

package sqlite

import (
	"context"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
)

func routeSpec(r *host.TaskTypeRoute) string {
	b, _ := json.Marshal(r.TaskTypeSpec)
	return string(b)
}

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
	if err := host.CheckID(op, "pack", pack); err != nil {
		return err
	}
	want := map[string]host.TaskTypeRoute{}
	for i := range routes {
		r := routes[i]
		if r.Pack == "" {
			r.Pack = pack
		}
		if r.Pack != pack {
			return host.Invalid(op, "pack", "route for %s names pack %s, not %s", r.TaskType, r.Pack, pack)
		}
		if err := host.CheckRoute(op, &r); err != nil {
			return err
		}
		if _, dup := want[r.TaskType]; dup {
			return host.Invalid(op, "task_type", "%s is routed twice", r.TaskType)
		}
		r.Origin = host.OriginManifest
		want[r.TaskType] = r
	}
	err := s.w.do(ctx, func(tx *wtx) error {
		rows, err := tx.Query(`SELECT task_type, pack, node, spec FROM task_type_routes WHERE pack = ?`, pack)
		if err != nil {
			return err
		}
		have := map[string]host.TaskTypeRoute{}
		for rows.Next() {
			r, err := scanRoute(rows, host.OriginManifest)
			if err != nil {
				rows.Close()
				return err
			}
			have[r.TaskType] = r
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		same := len(have) == len(want)
		for t, r := range want {
			h, ok := have[t]
			same = same && ok && h.Node == r.Node && routeSpec(&h) == routeSpec(&r)
		}
		if same {
			return nil
		}
		tx.touch(s.gens.routes)
		if _, err := tx.Exec(`DELETE FROM task_type_routes WHERE pack = ?`, pack); err != nil {
			return err
		}
		types := []string{}
		for t, r := range want {
			if _, err := tx.Exec(`INSERT INTO task_type_routes (task_type, pack, node, spec) VALUES (?, ?, ?, ?)`, t, pack, r.Node, routeSpec(&r)); err != nil {
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
			route.TaskType, route.Pack, route.Node, routeSpec(&route)); err != nil {
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
			return r, nil
		}
		found = append(found, r)
		r = host.TaskTypeRoute{}
	}
	if err := rows.Err(); err != nil {
		return r, host.Wrap(op, taskType, err)
	}
	switch len(found) {
	case 0:
		return r, host.Errorf(op, taskType, host.ErrNotFound, "no installed pack serves this task type; install one that does, or route it: packrun task-types set TYPE --pack NAME --node TYPEID")
	case 1:
		return found[0], nil
	}
	packs := make([]string, len(found))
	for i, f := range found {
		packs[i] = f.Pack
	}
	return r, host.Errorf(op, taskType, host.ErrConflict, "served by %s; choose one: packrun task-types set TYPE --pack NAME --node TYPEID", strings.Join(packs, ", "))
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
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].TaskType != out[j].TaskType {
			return out[i].TaskType < out[j].TaskType
		}
		if out[i].Origin != out[j].Origin {
			return out[i].Origin == host.OriginOperator
		}
		return out[i].Pack < out[j].Pack
	})
	return out, nil
}

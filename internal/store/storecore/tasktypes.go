package storecore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	"github.com/packrun/packrun/host"
)

// The task-type routing rules of host.TaskTypes, written once against Tx.

// LockTx is a write transaction that can lock a name for its duration, so
// that the transactions of several nodes changing what the name keys are
// serial (PostgreSQL: an advisory lock on hash(name) in space; SQLite's
// single writer needs none).
type LockTx interface {
	Tx
	LockName(ctx context.Context, space int64, name string) error
}

// Lock spaces of LockTx.LockName.
const (
	LockArtifactName = 1 // task, attempt and name of an artifact
	LockPackRoutes   = 2 // a pack's task-type routes
)

const routeColumns = `task_type, pack, node, spec`

func scanRoute(row Row, origin string) (host.TaskTypeRoute, error) {
	var r host.TaskTypeRoute
	var spec string
	if err := row.Scan(&r.TaskType, &r.Pack, &r.Node, &spec); err != nil {
		return r, err
	}
	if err := json.Unmarshal([]byte(spec), &r.TaskTypeSpec); err != nil {
		return r, fmt.Errorf("task type %s: stored spec: %w", r.TaskType, err)
	}
	r.Origin = origin
	return r, nil
}

func routesOf(ctx context.Context, q Querier, origin, query string, args ...any) ([]host.TaskTypeRoute, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return CollectRows(rows, func(r Row) (host.TaskTypeRoute, error) { return scanRoute(r, origin) })
}

// SetPackTaskTypes replaces the manifest routes of pack by want
// (PackRoutes'), with its event; it reports whether they changed (the
// same routes again change nothing).
func SetPackTaskTypes(ctx context.Context, tx LockTx, pack string, want map[string]host.TaskTypeRoute) (bool, error) {
	if err := tx.LockName(ctx, LockPackRoutes, pack); err != nil {
		return false, err
	}
	have, err := routesOf(ctx, tx, host.OriginManifest, `SELECT `+routeColumns+` FROM task_type_routes WHERE pack = $1`, pack)
	if err != nil {
		return false, err
	}
	if SameRoutes(have, want) {
		return false, nil
	}
	if _, err := tx.Exec(ctx, `DELETE FROM task_type_routes WHERE pack = $1`, pack); err != nil {
		return false, err
	}
	types := []string{}
	for t, r := range want {
		if _, err := tx.Exec(ctx, `INSERT INTO task_type_routes (`+routeColumns+`) VALUES ($1, $2, $3, $4)`, t, pack, r.Node, RouteSpec(&r)); err != nil {
			return false, err
		}
		types = append(types, t)
	}
	sort.Strings(types)
	return true, tx.Event(host.EventTaskTypesUpdated, "", "", map[string]any{"pack": pack, "task_types": types})
}

// SetTaskTypeOverride sets the operator's route (checked by
// host.CheckRoute), with its event.
func SetTaskTypeOverride(ctx context.Context, tx Tx, route *host.TaskTypeRoute) error {
	if _, err := tx.Exec(ctx, `INSERT INTO task_type_overrides (`+routeColumns+`) VALUES ($1, $2, $3, $4)
		ON CONFLICT (task_type) DO UPDATE SET pack = excluded.pack, node = excluded.node, spec = excluded.spec`,
		route.TaskType, route.Pack, route.Node, RouteSpec(route)); err != nil {
		return err
	}
	return tx.Event(host.EventTaskTypeOverrideSet, "", "", map[string]any{"task_type": route.TaskType, "pack": route.Pack, "node": route.Node})
}

// RemoveTaskTypeOverride removes the operator's route of taskType, with
// its event (errors under op; none is ErrNotFound).
func RemoveTaskTypeOverride(ctx context.Context, tx Tx, op, taskType string) error {
	n, err := tx.Exec(ctx, `DELETE FROM task_type_overrides WHERE task_type = $1`, taskType)
	if err != nil {
		return err
	}
	if n == 0 {
		return host.Errorf(op, taskType, host.ErrNotFound, "")
	}
	return tx.Event(host.EventTaskTypeOverrideUnset, "", "", map[string]any{"task_type": taskType})
}

// ResolveTaskType is the route of taskType (errors under op): the
// operator's override, or else the one manifest route (see Resolve).
func ResolveTaskType(ctx context.Context, q Querier, op, taskType string) (host.TaskTypeRoute, error) {
	// One statement: the override (at most one, listed first) and every
	// manifest route.
	rows, err := q.Query(ctx, `SELECT `+routeColumns+`, TRUE FROM task_type_overrides WHERE task_type = $1
		UNION ALL SELECT `+routeColumns+`, FALSE FROM task_type_routes WHERE task_type = $1
		ORDER BY 5 DESC, 2`, taskType)
	if err != nil {
		return host.TaskTypeRoute{}, host.Wrap(op, taskType, err)
	}
	found, err := CollectRows(rows, func(row Row) (host.TaskTypeRoute, error) {
		var r host.TaskTypeRoute
		var spec string
		var override bool
		if err := row.Scan(&r.TaskType, &r.Pack, &r.Node, &spec, &override); err != nil {
			return r, err
		}
		if err := json.Unmarshal([]byte(spec), &r.TaskTypeSpec); err != nil {
			return r, fmt.Errorf("task type %s: stored spec: %w", r.TaskType, err)
		}
		r.Origin = host.OriginManifest
		if override {
			r.Origin = host.OriginOperator
		}
		return r, nil
	})
	if err != nil {
		return host.TaskTypeRoute{}, host.Wrap(op, taskType, err)
	}
	return Resolve(op, taskType, found)
}

// ListTaskTypes lists the overrides and the manifest routes, in
// SortRoutes' order.
func ListTaskTypes(ctx context.Context, q Querier) ([]host.TaskTypeRoute, error) {
	var out []host.TaskTypeRoute
	for _, src := range []struct{ table, origin string }{{"task_type_overrides", host.OriginOperator}, {"task_type_routes", host.OriginManifest}} {
		routes, err := routesOf(ctx, q, src.origin, `SELECT `+routeColumns+` FROM `+src.table)
		if err != nil {
			return nil, err
		}
		out = append(out, routes...)
	}
	SortRoutes(out)
	return out, nil
}

// The kinds of TaskSetupRow: the operator's route, a manifest route, the
// spec, an agent. A driver's own rows read with them take kinds from
// SetupKindDriver on.
const (
	setupOverride = iota
	setupManifest
	setupSpec
	setupAgent
	SetupKindDriver
)

// TaskSetupRow is one row a task type's setup is decoded from: the
// stored text, not a decoded record, so that a driver may keep the rows
// and decode them again for each caller, who then shares nothing.
type TaskSetupRow struct {
	Kind                 int
	Key, Pack, Node, Rec string
}

// ReadTaskSetupRows is what host.TaskSetups.TaskSetup reads, in one
// statement: the rows of taskType's routes (the operator's override
// first, then the manifest routes by pack, as ResolveTaskType), its spec
// and every agent by id, and with them, in the same statement (so from the same snapshot), the
// rows of extra: a SELECT of five columns of TaskSetupRow's types, its
// kind SetupKindDriver or more ("" for none).
func ReadTaskSetupRows(ctx context.Context, q Querier, taskType, extra string) ([]TaskSetupRow, error) {
	query := `SELECT 0, task_type, pack, node, spec FROM task_type_overrides WHERE task_type = $1
		UNION ALL SELECT 1, task_type, pack, node, spec FROM task_type_routes WHERE task_type = $1
		UNION ALL SELECT 2, task_type, '', '', spec FROM task_type_specs WHERE task_type = $1
		UNION ALL SELECT 3, agent_id, '', '', record FROM agents`
	if extra != "" {
		query += "\n\t\tUNION ALL " + extra
	}
	rows, err := q.Query(ctx, query+"\n\t\tORDER BY 1, 3, 2", taskType)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TaskSetupRow
	for rows.Next() {
		var r TaskSetupRow
		if err := rows.Scan(&r.Kind, &r.Key, &r.Pack, &r.Node, &r.Rec); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DecodeTaskSetup decodes the setup of taskType from its rows (a
// driver's own kinds are skipped). Every call returns records of its own.
func DecodeTaskSetup(taskType string, rows []TaskSetupRow) *host.TaskSetup {
	out := &host.TaskSetup{Agents: []host.AgentRecord{}}
	out.SpecErr = host.Errorf("task type spec", taskType, host.ErrNotFound, "")
	var found []host.TaskTypeRoute
	for _, row := range rows {
		switch row.Kind {
		case setupOverride, setupManifest:
			r := host.TaskTypeRoute{Pack: row.Pack, Node: row.Node, Origin: host.OriginManifest}
			if row.Kind == setupOverride {
				r.Origin = host.OriginOperator
			}
			if err := json.Unmarshal([]byte(row.Rec), &r.TaskTypeSpec); err != nil && out.RouteErr == nil {
				out.RouteErr = host.Wrap("resolve task type", taskType, fmt.Errorf("task type %s: stored spec: %w", row.Key, err))
			}
			r.TaskType = row.Key
			found = append(found, r)
		case setupSpec:
			out.SpecErr = host.Wrap("task type spec", taskType, json.Unmarshal([]byte(row.Rec), &out.Spec))
		case setupAgent:
			var a host.AgentRecord
			if err := json.Unmarshal([]byte(row.Rec), &a); err != nil {
				out.AgentsErr = host.Wrap("list agents", "", err)
				continue
			}
			out.Agents = append(out.Agents, a)
		}
	}
	if out.AgentsErr != nil {
		out.Agents = nil
	}
	if out.RouteErr == nil {
		out.Route, out.RouteErr = Resolve("resolve task type", taskType, found)
	}
	return out
}

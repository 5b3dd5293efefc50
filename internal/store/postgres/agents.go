package postgres

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
)

var (
	_ host.Agents        = (*Store)(nil)
	_ host.TaskTypeSpecs = (*Store)(nil)
)

// configTable is a table of whole JSON records keyed by id (agents,
// profiles, task_type_specs): putConfig replaces, getConfig and
// listConfig read, as internal/store/sqlite's. No read cache: every node reads
// what any node last committed.
type configTable struct {
	table, key, column string
	event              string // appended by putConfig, with the key and "replaced"
}

var (
	agentsTable   = configTable{"agents", "agent_id", "record", host.EventAgentRegistered}
	profilesTable = configTable{"profiles", "profile_id", "record", host.EventProfileRegistered}
	specsTable    = configTable{"task_type_specs", "task_type", "spec", host.EventTaskTypeSpecSet}
)

// putConfig stores v under id, replacing any row, with its event in the
// same transaction. Whether it replaced a row is decided by the insert
// itself (ON CONFLICT DO NOTHING waits for a concurrent insert of the
// same id on another node, then finds it), so two nodes putting one new
// id at once report one insert and one replacement.
func (s *Store) putConfig(ctx context.Context, t configTable, op, id string, v any) (replaced bool, err error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, host.Wrap(op, id, err)
	}
	err = s.write(ctx, func(x *tx) error {
		replaced = false
		now := ts(s.now())
		tag, err := x.Exec(ctx, `INSERT INTO `+t.table+` (`+t.key+`, `+t.column+`, updated_at) VALUES ($1, $2, $3)
			ON CONFLICT (`+t.key+`) DO NOTHING`, id, string(b), now)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			replaced = true
			if _, err := x.Exec(ctx, `UPDATE `+t.table+` SET `+t.column+` = $2, updated_at = $3 WHERE `+t.key+` = $1`, id, string(b), now); err != nil {
				return err
			}
		}
		_, err = x.event(t.event, "", "", map[string]any{t.key: id, "replaced": replaced})
		return err
	})
	return replaced, host.Wrap(op, id, err)
}

// getConfig reads the record under id into v; ErrNotFound if none.
func (s *Store) getConfig(ctx context.Context, t configTable, op, id string, v any) error {
	var rec string
	err := s.pool.QueryRow(ctx, `SELECT `+t.column+` FROM `+t.table+` WHERE `+t.key+` = $1`, id).Scan(&rec)
	if errors.Is(err, pgx.ErrNoRows) {
		return host.Errorf(op, id, host.ErrNotFound, "")
	}
	if err != nil {
		return host.Wrap(op, id, err)
	}
	return host.Wrap(op, id, json.Unmarshal([]byte(rec), v))
}

// listConfig reads every record of t, by key, as a T.
func listConfig[T any](ctx context.Context, s *Store, t configTable, op string) ([]T, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+t.column+` FROM `+t.table+` ORDER BY `+t.key)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) {
		var rec string
		var v T
		if err := r.Scan(&rec); err != nil {
			return v, err
		}
		return v, json.Unmarshal([]byte(rec), &v)
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
}

// PutAgent implements host.Agents.
func (s *Store) PutAgent(ctx context.Context, rec *host.AgentRecord) (bool, error) {
	return s.putConfig(ctx, agentsTable, "put agent", rec.Agent.AgentID, rec)
}

// Agent implements host.Agents.
func (s *Store) Agent(ctx context.Context, agentID string) (*host.AgentRecord, error) {
	rec := &host.AgentRecord{}
	return rec, s.getConfig(ctx, agentsTable, "agent", agentID, rec)
}

// ListAgents implements host.Agents.
func (s *Store) ListAgents(ctx context.Context) ([]host.AgentRecord, error) {
	return listConfig[host.AgentRecord](ctx, s, agentsTable, "list agents")
}

// PutProfile implements host.Agents.
func (s *Store) PutProfile(ctx context.Context, p *host.SubagentProfile) (bool, error) {
	return s.putConfig(ctx, profilesTable, "put profile", p.ProfileID, p)
}

// Profile implements host.Agents.
func (s *Store) Profile(ctx context.Context, profileID string) (*host.SubagentProfile, error) {
	p := &host.SubagentProfile{}
	return p, s.getConfig(ctx, profilesTable, "profile", profileID, p)
}

// ListProfiles implements host.Agents.
func (s *Store) ListProfiles(ctx context.Context) ([]host.SubagentProfile, error) {
	return listConfig[host.SubagentProfile](ctx, s, profilesTable, "list profiles")
}

// SetTaskTypeSpec implements host.TaskTypeSpecs.
func (s *Store) SetTaskTypeSpec(ctx context.Context, spec host.TaskTypeSpec) error {
	const op = "set task type spec"
	probe := host.TaskTypeRoute{TaskTypeSpec: spec, Pack: "x", Node: "x"}
	if err := host.CheckRoute(op, &probe); err != nil {
		return err
	}
	_, err := s.putConfig(ctx, specsTable, op, spec.TaskType, spec)
	return err
}

// RemoveTaskTypeSpec implements host.TaskTypeSpecs.
func (s *Store) RemoveTaskTypeSpec(ctx context.Context, taskType string) error {
	const op = "remove task type spec"
	err := s.write(ctx, func(x *tx) error {
		tag, err := x.Exec(ctx, `DELETE FROM task_type_specs WHERE task_type = $1`, taskType)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return host.Errorf(op, taskType, host.ErrNotFound, "")
		}
		_, err = x.event(host.EventTaskTypeSpecRemoved, "", "", map[string]any{"task_type": taskType})
		return err
	})
	return host.Wrap(op, taskType, err)
}

// TaskTypeSpec implements host.TaskTypeSpecs.
func (s *Store) TaskTypeSpec(ctx context.Context, taskType string) (host.TaskTypeSpec, error) {
	var spec host.TaskTypeSpec
	err := s.getConfig(ctx, specsTable, "task type spec", taskType, &spec)
	return spec, err
}

// ListTaskTypeSpecs implements host.TaskTypeSpecs.
func (s *Store) ListTaskTypeSpecs(ctx context.Context) ([]host.TaskTypeSpec, error) {
	return listConfig[host.TaskTypeSpec](ctx, s, specsTable, "list task type specs")
}

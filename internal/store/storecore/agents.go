package storecore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/packrun/packrun/host"
)

// The configuration tables' rules (host.Agents, host.TaskTypeSpecs)
// written once against Tx: whole JSON records keyed by id (agents,
// profiles, task_type_specs). A driver keeps what it reads them through
// (SQLite caches them, see its configCache).

// ConfigTable is a table of whole JSON records keyed by id.
type ConfigTable struct {
	Table, Key, Column string
	Event              string // appended by PutConfig, with the key and "replaced"
}

// The configuration tables.
var (
	AgentsTable   = ConfigTable{"agents", "agent_id", "record", host.EventAgentRegistered}
	ProfilesTable = ConfigTable{"profiles", "profile_id", "record", host.EventProfileRegistered}
	SpecsTable    = ConfigTable{"task_type_specs", "task_type", "spec", host.EventTaskTypeSpecSet}
)

// PutConfig stores v under id, replacing any row, with its event in the
// same transaction. Whether it replaced a row is decided by the insert
// itself (ON CONFLICT DO NOTHING waits, on PostgreSQL, for a concurrent
// insert of the same id on another node, then finds it), so two writers
// putting one new id at once report one insert and one replacement.
func PutConfig(ctx context.Context, tx Tx, t ConfigTable, id string, v any, now time.Time) (replaced bool, err error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, err
	}
	at := host.FormatTime(now)
	n, err := tx.Exec(ctx, `INSERT INTO `+t.Table+` (`+t.Key+`, `+t.Column+`, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (`+t.Key+`) DO NOTHING`, id, string(b), at)
	if err != nil {
		return false, err
	}
	if n == 0 {
		replaced = true
		if _, err := tx.Exec(ctx, `UPDATE `+t.Table+` SET `+t.Column+` = $2, updated_at = $3 WHERE `+t.Key+` = $1`, id, string(b), at); err != nil {
			return false, err
		}
	}
	return replaced, tx.Event(t.Event, "", "", map[string]any{t.Key: id, "replaced": replaced})
}

// RemoveTaskTypeSpec deletes a task type's spec; ErrNotFound if none.
func RemoveTaskTypeSpec(ctx context.Context, tx Tx, op, taskType string) error {
	n, err := tx.Exec(ctx, `DELETE FROM task_type_specs WHERE task_type = $1`, taskType)
	if err != nil {
		return err
	}
	if n == 0 {
		return host.Errorf(op, taskType, host.ErrNotFound, "")
	}
	return tx.Event(host.EventTaskTypeSpecRemoved, "", "", map[string]any{"task_type": taskType})
}

// ConfigRecords reads the records of t under id (one, or none), or every
// record of t, by key, when all.
func ConfigRecords(ctx context.Context, q Querier, t ConfigTable, id string, all bool) ([]string, error) {
	query, args := `SELECT `+t.Column+` FROM `+t.Table+` ORDER BY `+t.Key, []any{}
	if !all {
		query, args = `SELECT `+t.Column+` FROM `+t.Table+` WHERE `+t.Key+` = $1`, []any{id}
	}
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	recs, err := CollectRows(rows, func(r Row) (string, error) {
		var rec string
		return rec, r.Scan(&rec)
	})
	if recs == nil && err == nil {
		recs = []string{}
	}
	return recs, err
}

// ConfigDriver is what Configs asks of a driver.
type ConfigDriver interface {
	// WriteConfig runs fn in a write transaction, at now (SQLite marks
	// the configuration tables changed, for its read cache).
	WriteConfig(ctx context.Context, fn func(tx Tx, now time.Time) error) error
	// ReadConfig is ConfigRecords (SQLite's through its read cache).
	ReadConfig(ctx context.Context, t ConfigTable, id string, all bool) ([]string, error)
}

// Configs implements host.Agents and host.TaskTypeSpecs on a driver's
// ConfigDriver; the drivers' Store embeds it.
type Configs struct{ Driver ConfigDriver }

// put stores v under id (PutConfig).
func (c Configs) put(ctx context.Context, t ConfigTable, op, id string, v any) (replaced bool, err error) {
	err = c.Driver.WriteConfig(ctx, func(tx Tx, now time.Time) error {
		var err error
		replaced, err = PutConfig(ctx, tx, t, id, v, now)
		return err
	})
	return replaced, host.Wrap(op, id, err)
}

// get reads the record under id into v; ErrNotFound if none.
func (c Configs) get(ctx context.Context, t ConfigTable, op, id string, v any) error {
	recs, err := c.Driver.ReadConfig(ctx, t, id, false)
	if err != nil {
		return host.Wrap(op, id, err)
	}
	if len(recs) == 0 {
		return host.Errorf(op, id, host.ErrNotFound, "")
	}
	return host.Wrap(op, id, json.Unmarshal([]byte(recs[0]), v))
}

// configList reads every record of t, by key, as a T.
func configList[T any](ctx context.Context, c Configs, t ConfigTable, op string) ([]T, error) {
	recs, err := c.Driver.ReadConfig(ctx, t, "", true)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	out := make([]T, 0, len(recs))
	for _, rec := range recs {
		var v T
		if err := json.Unmarshal([]byte(rec), &v); err != nil {
			return nil, host.Wrap(op, "", err)
		}
		out = append(out, v)
	}
	return out, nil
}

// PutAgent implements host.Agents.
func (c Configs) PutAgent(ctx context.Context, rec *host.AgentRecord) (bool, error) {
	return c.put(ctx, AgentsTable, "put agent", rec.Agent.AgentID, rec)
}

// Agent implements host.Agents.
func (c Configs) Agent(ctx context.Context, agentID string) (*host.AgentRecord, error) {
	rec := &host.AgentRecord{}
	return rec, c.get(ctx, AgentsTable, "agent", agentID, rec)
}

// ListAgents implements host.Agents.
func (c Configs) ListAgents(ctx context.Context) ([]host.AgentRecord, error) {
	return configList[host.AgentRecord](ctx, c, AgentsTable, "list agents")
}

// PutProfile implements host.Agents.
func (c Configs) PutProfile(ctx context.Context, p *host.SubagentProfile) (bool, error) {
	return c.put(ctx, ProfilesTable, "put profile", p.ProfileID, p)
}

// Profile implements host.Agents.
func (c Configs) Profile(ctx context.Context, profileID string) (*host.SubagentProfile, error) {
	p := &host.SubagentProfile{}
	return p, c.get(ctx, ProfilesTable, "profile", profileID, p)
}

// ListProfiles implements host.Agents.
func (c Configs) ListProfiles(ctx context.Context) ([]host.SubagentProfile, error) {
	return configList[host.SubagentProfile](ctx, c, ProfilesTable, "list profiles")
}

// SetTaskTypeSpec implements host.TaskTypeSpecs.
func (c Configs) SetTaskTypeSpec(ctx context.Context, spec host.TaskTypeSpec) error {
	const op = "set task type spec"
	probe := host.TaskTypeRoute{TaskTypeSpec: spec, Pack: "x", Node: "x"}
	if err := host.CheckRoute(op, &probe); err != nil {
		return err
	}
	_, err := c.put(ctx, SpecsTable, op, spec.TaskType, spec)
	return err
}

// RemoveTaskTypeSpec implements host.TaskTypeSpecs.
func (c Configs) RemoveTaskTypeSpec(ctx context.Context, taskType string) error {
	const op = "remove task type spec"
	err := c.Driver.WriteConfig(ctx, func(tx Tx, _ time.Time) error {
		return RemoveTaskTypeSpec(ctx, tx, op, taskType)
	})
	return host.Wrap(op, taskType, err)
}

// TaskTypeSpec implements host.TaskTypeSpecs.
func (c Configs) TaskTypeSpec(ctx context.Context, taskType string) (host.TaskTypeSpec, error) {
	var spec host.TaskTypeSpec
	err := c.get(ctx, SpecsTable, "task type spec", taskType, &spec)
	return spec, err
}

// ListTaskTypeSpecs implements host.TaskTypeSpecs.
func (c Configs) ListTaskTypeSpecs(ctx context.Context) ([]host.TaskTypeSpec, error) {
	return configList[host.TaskTypeSpec](ctx, c, SpecsTable, "list task type specs")
}

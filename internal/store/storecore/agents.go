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

// DecodeConfig decodes the first of recs into v; ErrNotFound if none.
func DecodeConfig(recs []string, op, id string, v any) error {
	if len(recs) == 0 {
		return host.Errorf(op, id, host.ErrNotFound, "")
	}
	return host.Wrap(op, id, json.Unmarshal([]byte(recs[0]), v))
}

// DecodeConfigs decodes every record of recs as a T.
func DecodeConfigs[T any](recs []string) ([]T, error) {
	out := make([]T, 0, len(recs))
	for _, rec := range recs {
		var v T
		if err := json.Unmarshal([]byte(rec), &v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

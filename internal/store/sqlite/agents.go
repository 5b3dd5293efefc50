package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// configTable is a table of whole JSON records keyed by id (agents,
// profiles, task_type_specs): put replaces, get and list read.
type configTable struct {
	table, key, column string
	event              string // appended by put, with the key and "replaced"
}

var (
	agentsTable   = configTable{"agents", "agent_id", "record", host.EventAgentRegistered}
	profilesTable = configTable{"profiles", "profile_id", "record", host.EventProfileRegistered}
	specsTable    = configTable{"task_type_specs", "task_type", "spec", host.EventTaskTypeSpecSet}
)

// put stores v under id, replacing any row, with its event in the same
// write.
func (s *Store) put(ctx context.Context, t configTable, op, id string, v any) (replaced bool, err error) {
	b, err := json.Marshal(v)
	if err != nil {
		return false, host.Wrap(op, id, err)
	}
	err = s.w.do(ctx, func(tx *wtx) error {
		var one int
		switch err := tx.QueryRow(`SELECT 1 FROM `+t.table+` WHERE `+t.key+` = ?`, id).Scan(&one); {
		case err == nil:
			replaced = true
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.Exec(`INSERT INTO `+t.table+` (`+t.key+`, `+t.column+`, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (`+t.key+`) DO UPDATE SET `+t.column+` = excluded.`+t.column+`, updated_at = excluded.updated_at`,
			id, string(b), ts(s.now())); err != nil {
			return err
		}
		s.configWrite(tx)
		_, err := s.event(tx, t.event, "", "", map[string]any{t.key: id, "replaced": replaced})
		return err
	})
	return replaced, host.Wrap(op, id, err)
}

// configCache keeps what get and list read from the configuration tables,
// found or not: the dispatcher reads a task type's spec and the agents
// for every task it runs, and they change only when an operator says so.
// Keys are "<table>\x00<id>" for get (no records: not found) and
// "<table>\x00" for list. Coherent through the routes generation, which
// every write of these tables touches (configWrite; see genCache).
type configCache = genCache[string, []string]

func newConfigCache(g gen) *configCache {
	return newGenCache(g, 16<<20, func(k string, recs []string) int {
		n := len(k)
		for _, r := range recs {
			n += len(r)
		}
		return n
	})
}

// configWrite marks tx as changing the configuration tables.
func (s *Store) configWrite(tx *wtx) { tx.touch(s.gens.routes) }

// records reads the records of t under id (one, or none), or every
// record of t when all, through configCache.
func (s *Store) records(ctx context.Context, t configTable, id string, all bool) ([]string, error) {
	key := t.table + "\x00"
	q, args := `SELECT `+t.column+` FROM `+t.table+` ORDER BY `+t.key, []any{}
	if !all {
		key += id
		q, args = `SELECT `+t.column+` FROM `+t.table+` WHERE `+t.key+` = ?`, []any{id}
	}
	now := time.Now()
	recs, ok, g := s.config.lookup(key, now)
	if ok {
		return recs, nil
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	recs = []string{}
	for rows.Next() {
		var rec string
		if err := rows.Scan(&rec); err != nil {
			return nil, err
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	s.config.store(key, recs, g, now)
	return recs, nil
}

// get reads the record under id into v; ErrNotFound if none.
func (s *Store) get(ctx context.Context, t configTable, op, id string, v any) error {
	recs, err := s.records(ctx, t, id, false)
	if err != nil {
		return host.Wrap(op, id, err)
	}
	if len(recs) == 0 {
		return host.Errorf(op, id, host.ErrNotFound, "")
	}
	return host.Wrap(op, id, json.Unmarshal([]byte(recs[0]), v))
}

// list reads every record, by key, through each(raw).
func (s *Store) list(ctx context.Context, t configTable, op string, each func([]byte) error) error {
	recs, err := s.records(ctx, t, "", true)
	if err != nil {
		return host.Wrap(op, "", err)
	}
	for _, rec := range recs {
		if err := each([]byte(rec)); err != nil {
			return host.Wrap(op, "", err)
		}
	}
	return nil
}

// listOf reads every record of t as a T.
func listOf[T any](ctx context.Context, s *Store, t configTable, op string) ([]T, error) {
	out := []T{}
	err := s.list(ctx, t, op, func(b []byte) error {
		var v T
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		out = append(out, v)
		return nil
	})
	return out, err
}

// PutAgent implements host.Agents.
func (s *Store) PutAgent(ctx context.Context, rec *host.AgentRecord) (bool, error) {
	return s.put(ctx, agentsTable, "put agent", rec.Agent.AgentID, rec)
}

// Agent implements host.Agents.
func (s *Store) Agent(ctx context.Context, agentID string) (*host.AgentRecord, error) {
	rec := &host.AgentRecord{}
	return rec, s.get(ctx, agentsTable, "agent", agentID, rec)
}

// ListAgents implements host.Agents.
func (s *Store) ListAgents(ctx context.Context) ([]host.AgentRecord, error) {
	return listOf[host.AgentRecord](ctx, s, agentsTable, "list agents")
}

// PutProfile implements host.Agents.
func (s *Store) PutProfile(ctx context.Context, p *host.SubagentProfile) (bool, error) {
	return s.put(ctx, profilesTable, "put profile", p.ProfileID, p)
}

// Profile implements host.Agents.
func (s *Store) Profile(ctx context.Context, profileID string) (*host.SubagentProfile, error) {
	p := &host.SubagentProfile{}
	return p, s.get(ctx, profilesTable, "profile", profileID, p)
}

// ListProfiles implements host.Agents.
func (s *Store) ListProfiles(ctx context.Context) ([]host.SubagentProfile, error) {
	return listOf[host.SubagentProfile](ctx, s, profilesTable, "list profiles")
}

// SetTaskTypeSpec implements host.TaskTypeSpecs.
func (s *Store) SetTaskTypeSpec(ctx context.Context, spec host.TaskTypeSpec) error {
	const op = "set task type spec"
	probe := host.TaskTypeRoute{TaskTypeSpec: spec, Pack: "x", Node: "x"}
	if err := host.CheckRoute(op, &probe); err != nil {
		return err
	}
	_, err := s.put(ctx, specsTable, op, spec.TaskType, spec)
	return err
}

// RemoveTaskTypeSpec implements host.TaskTypeSpecs.
func (s *Store) RemoveTaskTypeSpec(ctx context.Context, taskType string) error {
	const op = "remove task type spec"
	err := s.w.do(ctx, func(tx *wtx) error {
		s.configWrite(tx)
		res, err := tx.Exec(`DELETE FROM task_type_specs WHERE task_type = ?`, taskType)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return host.Errorf(op, taskType, host.ErrNotFound, "")
		}
		_, err = s.event(tx, host.EventTaskTypeSpecRemoved, "", "", map[string]any{"task_type": taskType})
		return err
	})
	return host.Wrap(op, taskType, err)
}

// TaskTypeSpec implements host.TaskTypeSpecs.
func (s *Store) TaskTypeSpec(ctx context.Context, taskType string) (host.TaskTypeSpec, error) {
	var spec host.TaskTypeSpec
	err := s.get(ctx, specsTable, "task type spec", taskType, &spec)
	return spec, err
}

// ListTaskTypeSpecs implements host.TaskTypeSpecs.
func (s *Store) ListTaskTypeSpecs(ctx context.Context) ([]host.TaskTypeSpec, error) {
	return listOf[host.TaskTypeSpec](ctx, s, specsTable, "list task type specs")
}

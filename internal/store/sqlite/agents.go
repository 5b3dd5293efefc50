package sqlite

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// The configuration tables' rules are storecore's (agents.go), run in the
// writer's transaction (coreTx); their reads go through configCache.

type configTable = storecore.ConfigTable

var (
	agentsTable   = storecore.AgentsTable
	profilesTable = storecore.ProfilesTable
	specsTable    = storecore.SpecsTable
)

// put stores v under id (storecore.PutConfig).
func (s *Store) put(ctx context.Context, t configTable, op, id string, v any) (replaced bool, err error) {
	err = s.w.do(ctx, func(tx *wtx) error {
		s.configWrite(tx)
		var err error
		replaced, err = storecore.PutConfig(ctx, coreTx{s, tx}, t, id, v, s.now())
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
	key := t.Table + "\x00"
	if !all {
		key += id
	}
	now := time.Now()
	recs, ok, g := s.config.lookup(key, now)
	if ok {
		return recs, nil
	}
	recs, err := storecore.ConfigRecords(ctx, coreDB{s}, t, id, all)
	if err != nil {
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
	return storecore.DecodeConfig(recs, op, id, v)
}

// listOf reads every record of t as a T.
func listOf[T any](ctx context.Context, s *Store, t configTable, op string) ([]T, error) {
	recs, err := s.records(ctx, t, "", true)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	out, err := storecore.DecodeConfigs[T](recs)
	return out, host.Wrap(op, "", err)
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
		return storecore.RemoveTaskTypeSpec(ctx, coreTx{s, tx}, op, taskType)
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

package postgres

import (
	"context"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

var (
	_ host.Agents        = (*Store)(nil)
	_ host.TaskTypeSpecs = (*Store)(nil)
)

// The configuration tables' rules are storecore's (agents.go). No read
// cache: every node reads what any node last committed.

var (
	agentsTable   = storecore.AgentsTable
	profilesTable = storecore.ProfilesTable
	specsTable    = storecore.SpecsTable
)

// putConfig stores v under id (storecore.PutConfig).
func (s *Store) putConfig(ctx context.Context, t storecore.ConfigTable, op, id string, v any) (replaced bool, err error) {
	err = s.write(ctx, func(x *tx) error {
		var err error
		replaced, err = storecore.PutConfig(ctx, coreTx{x}, t, id, v, s.now())
		return err
	})
	return replaced, host.Wrap(op, id, err)
}

// getConfig reads the record under id into v; ErrNotFound if none.
func (s *Store) getConfig(ctx context.Context, t storecore.ConfigTable, op, id string, v any) error {
	recs, err := storecore.ConfigRecords(ctx, corePool{s.pool}, t, id, false)
	if err != nil {
		return host.Wrap(op, id, err)
	}
	return storecore.DecodeConfig(recs, op, id, v)
}

// listConfig reads every record of t, by key, as a T.
func listConfig[T any](ctx context.Context, s *Store, t storecore.ConfigTable, op string) ([]T, error) {
	recs, err := storecore.ConfigRecords(ctx, corePool{s.pool}, t, "", true)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	out, err := storecore.DecodeConfigs[T](recs)
	return out, host.Wrap(op, "", err)
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
		return storecore.RemoveTaskTypeSpec(ctx, coreTx{x}, op, taskType)
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

package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// bundle is what a claimed task runs as, compiled before its attempt: its
// task type's spec, its profile (requested_profile_id, else the type's
// default_profile_id) and the home's agent, the adapter and model its
// node's adapter calls use, and the nodeContext.agent projection handed to
// the node (recorded in the attempt, so replay hands over the same).
type bundle struct {
	spec    host.TaskTypeSpec
	profile *host.SubagentProfile
	agentID string
	// constitution is the agent's constitution hash ("" without one).
	constitution string
	adapterID    string
	model        string
	// agent is nodeContext.agent; nil when the task has neither an agent
	// nor a profile.
	agent json.RawMessage
	hash  string // the bundle hash (in agent and the event)
}

// AgentContext is nodeContext.agent: the agent and profile a task runs
// as, projected for the node, with the hashes that pin them.
type AgentContext struct {
	AgentID      string `json:"agent_id,omitempty"`
	InternalName string `json:"internal_name,omitempty"`
	DisplayName  string `json:"display_name,omitempty"`
	ProfileID    string `json:"profile_id,omitempty"`
	Style        string `json:"style,omitempty"`
	Role         string `json:"role,omitempty"`
	// SkillIDs are the task's skill_ids, else the profile's.
	SkillIDs  []string `json:"skill_ids,omitempty"`
	AdapterID string   `json:"adapter_id,omitempty"`
	Model     string   `json:"model,omitempty"`
	// Prompt is the profile's prompt_parts, then the task's subject and
	// description, joined by blank lines and cut to
	// context_policy.max_prompt_chars characters (PromptTruncated says so).
	Prompt          string `json:"prompt,omitempty"`
	PromptTruncated bool   `json:"prompt_truncated,omitempty"`
	// RecentTasks (context_policy.include_recent_memory) are the latest
	// settled tasks of the same type and tenant, newest first.
	RecentTasks      []RecentTask       `json:"recent_tasks,omitempty"`
	ResultPolicy     *host.ResultPolicy `json:"result_policy,omitempty"`
	ConstitutionHash string             `json:"constitution_hash,omitempty"`
	BundleHash       string             `json:"bundle_hash"`
}

// RecentTask is one entry of AgentContext.RecentTasks.
type RecentTask struct {
	TaskID  string          `json:"task_id"`
	Status  host.TaskStatus `json:"status"`
	Summary string          `json:"summary,omitempty"`
}

// Bounds of the recent memory handed to a node.
const (
	recentTasks      = 5
	recentSummaryLen = 200
)

// compile resolves what task t runs as. A profile the task names that is
// not registered (any more), an agent the profile names that is not, or
// several agents with nothing choosing is a permanent failure: running
// the task as someone else would be wrong.
func (d *Dispatcher) compile(ctx context.Context, t *host.TaskRecord, r *taskReads) (*bundle, error) {
	b := &bundle{}
	spec, err := r.spec(ctx)
	switch {
	case err == nil:
		b.spec = spec
	case !errors.Is(err, host.ErrNotFound):
		return nil, err
	}
	if id := orDefault(t.RequestedProfileID, b.spec.DefaultProfileID); id != "" {
		if b.profile, err = d.cfg.Backend.Profile(ctx, id); err != nil {
			return nil, fmt.Errorf("profile %q: %w", id, err)
		}
	}
	agent, err := d.agentOf(ctx, b.profile, r)
	if err != nil {
		return nil, err
	}
	b.adapterID = t.RequestedAdapterID
	b.model = t.RequestedModel
	for _, s := range []struct{ adapter, model string }{{b.spec.DefaultAdapterID, b.spec.DefaultModel}, profileDefaults(b.profile)} {
		b.adapterID = orDefault(b.adapterID, s.adapter)
		b.model = orDefault(b.model, s.model)
	}
	if agent == nil && b.profile == nil {
		return b, nil
	}
	ac := &AgentContext{AdapterID: b.adapterID, Model: b.model, SkillIDs: t.SkillIDs}
	if agent != nil {
		a := agent.Agent
		b.agentID, b.constitution = a.AgentID, agent.Constitution.Hash()
		ac.AgentID, ac.InternalName, ac.DisplayName, ac.ConstitutionHash = a.AgentID, a.InternalName, a.DisplayName, b.constitution
	}
	if p := b.profile; p != nil {
		ac.ProfileID, ac.Style, ac.Role = p.ProfileID, p.Style, p.Role
		if len(ac.SkillIDs) == 0 {
			ac.SkillIDs = p.SkillIDs
		}
		rp := p.ResultPolicy
		ac.ResultPolicy = &rp
		ac.Prompt, ac.PromptTruncated = prompt(p, t)
		if p.ContextPolicy.IncludeRecentMemory {
			if ac.RecentTasks, err = d.recent(ctx, t); err != nil {
				return nil, err
			}
		}
	}
	// The bundle hash pins what the attempt runs as: the same inputs give
	// the same hash (bundle_hash is left out of what it hashes).
	pinned, _ := json.Marshal(struct {
		TaskID  string        `json:"task_id"`
		Attempt int           `json:"attempt"`
		Context *AgentContext `json:"context"`
	}{t.TaskID, t.AttemptCount, ac})
	b.hash = host.ContentHash(pinned)
	ac.BundleHash = b.hash
	b.agent, _ = json.Marshal(ac)
	return b, nil
}

func profileDefaults(p *host.SubagentProfile) struct{ adapter, model string } {
	if p == nil {
		return struct{ adapter, model string }{}
	}
	return struct{ adapter, model string }{p.DefaultAdapterID, p.DefaultModel}
}

// agentOf is the agent a task runs as: the one the profile's
// integration_policy "agent_id" names, else the home's only agent, else
// none (no agent registered).
func (d *Dispatcher) agentOf(ctx context.Context, p *host.SubagentProfile, r *taskReads) (*host.AgentRecord, error) {
	if p != nil && p.IntegrationPolicy["agent_id"] != "" {
		id := p.IntegrationPolicy["agent_id"]
		a, err := d.cfg.Backend.Agent(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("agent %q (integration_policy of profile %s): %w", id, p.ProfileID, err)
		}
		return a, nil
	}
	all, err := r.agents(ctx)
	if err != nil {
		return nil, err
	}
	switch len(all) {
	case 0:
		return nil, nil
	case 1:
		return &all[0], nil
	}
	return nil, fmt.Errorf("%d agents are registered and nothing chooses one: set integration_policy.agent_id on the task's profile", len(all))
}

// prompt is the text handed to the node under the profile's
// context_policy: prompt_parts, then the task's subject and description,
// cut to max_prompt_chars characters.
func prompt(p *host.SubagentProfile, t *host.TaskRecord) (string, bool) {
	parts := slices.Clone(p.PromptParts)
	for _, s := range []string{t.Subject, t.Description} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	text := strings.Join(parts, "\n\n")
	limit := p.ContextPolicy.MaxPromptChars
	if utf8.RuneCountInString(text) <= limit {
		return text, false
	}
	r := []rune(text)
	return string(r[:limit]), true
}

// recent lists the latest settled tasks of t's type and tenant.
func (d *Dispatcher) recent(ctx context.Context, t *host.TaskRecord) ([]RecentTask, error) {
	list, err := d.cfg.Backend.ListTasks(ctx, host.TaskFilter{TaskType: t.TaskType, Tenant: t.Tenant, Limit: 50})
	if err != nil {
		return nil, err
	}
	out := []RecentTask{}
	for _, r := range list {
		if r.TaskID == t.TaskID || r.FinishedAt == nil || len(out) == recentTasks {
			continue
		}
		rt := RecentTask{TaskID: r.TaskID, Status: r.Status}
		if r.Outcome != nil {
			rt.Summary = clipRunes(r.Outcome.OperatorSummary, recentSummaryLen)
		}
		out = append(out, rt)
	}
	return out, nil
}

func clipRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// event is the bundle_compiled event's data for the attempt.
func (b *bundle) event(taskID, attemptID string, attempt int) json.RawMessage {
	if b == nil || b.agent == nil {
		return nil
	}
	profile := ""
	if b.profile != nil {
		profile = b.profile.ProfileID
	}
	data, _ := json.Marshal(map[string]any{
		"task_id": taskID, "attempt_id": attemptID, "attempt": attempt, "agent_id": b.agentID, "profile_id": profile,
		"constitution_hash": b.constitution, "bundle_hash": b.hash,
	})
	return data
}

// successFailure says why a completed attempt does not satisfy the task
// type's success_policy ("" when it does): require_adapter_audit needs an
// adapter call, require_artifacts an artifact, and
// verify_claimed_file_changes every file the output claims to have
// changed (its taskOutcome.file_changes, or "file_changes": [paths] in its
// output) stored as an artifact of the attempt.
func (b *bundle) successFailure(svc *services, output json.RawMessage, outcome *abi.TaskOutcome) string {
	p := b.spec.SuccessPolicy
	if p == nil {
		return ""
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	switch {
	case p.RequireAdapterAudit && len(svc.adapterCalls) == 0:
		return "success_policy.require_adapter_audit: the attempt made no adapter call"
	case p.RequireArtifacts && len(svc.artifacts) == 0:
		return "success_policy.require_artifacts: the attempt stored no artifact"
	case p.VerifyClaimedFileChanges:
		var out struct {
			FileChanges []string `json:"file_changes"`
		}
		_ = json.Unmarshal(output, &out) // an output that is not an object with file_changes claims none
		if outcome != nil {
			out.FileChanges = append(out.FileChanges, outcome.FileChanges...)
		}
		for _, f := range out.FileChanges {
			if !slices.ContainsFunc(svc.artifactNames, func(n string) bool { return n == f }) {
				return fmt.Sprintf("success_policy.verify_claimed_file_changes: %q is claimed changed but no artifact of the attempt holds it", f)
			}
		}
	}
	return ""
}

// taskReads are what starting a task reads of the backend: its type's
// route, spec and the agents. A backend that implements host.TaskSetups
// answers them in one read, made first; otherwise each is read when
// needed.
type taskReads struct {
	backend  host.Backend
	taskType string
	setup    *host.TaskSetup // nil: read each from backend
}

// readsFor starts the reads of a task of taskType.
func (d *Dispatcher) readsFor(ctx context.Context, taskType string) *taskReads {
	r := &taskReads{backend: d.cfg.Backend, taskType: taskType}
	if ts, ok := d.cfg.Backend.(host.TaskSetups); ok {
		setup, err := ts.TaskSetup(ctx, taskType)
		if err != nil {
			setup = &host.TaskSetup{RouteErr: err, SpecErr: err, AgentsErr: err}
		}
		r.setup = setup
	}
	return r
}

func (r *taskReads) route(ctx context.Context) (host.TaskTypeRoute, error) {
	if r.setup != nil {
		return r.setup.Route, r.setup.RouteErr
	}
	return r.backend.Resolve(ctx, r.taskType)
}

func (r *taskReads) spec(ctx context.Context) (host.TaskTypeSpec, error) {
	if r.setup != nil {
		return r.setup.Spec, r.setup.SpecErr
	}
	return r.backend.TaskTypeSpec(ctx, r.taskType)
}

func (r *taskReads) agents(ctx context.Context) ([]host.AgentRecord, error) {
	if r.setup != nil {
		return r.setup.Agents, r.setup.AgentsErr
	}
	return r.backend.ListAgents(ctx)
}

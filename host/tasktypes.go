package host

import "context"

// TaskTypes maps a task_type to the node that serves it. Routes come from
// installed pack manifests (fed by the caller at install, uninstall or
// start-up) and from operator overrides; an override always wins. Both are
// stored, so every process sharing the database resolves the same way.
type TaskTypes interface {
	// SetPackTaskTypes replaces every manifest route of pack with routes
	// (nil removes them, e.g. at uninstall). Unchanged routes are a no-op;
	// a change appends task_types_updated.
	SetPackTaskTypes(ctx context.Context, pack string, routes []TaskTypeRoute) error
	// SetTaskTypeOverride makes route win for its task type (event
	// task_type_override_set).
	SetTaskTypeOverride(ctx context.Context, route TaskTypeRoute) error
	// RemoveTaskTypeOverride drops an override (event
	// task_type_override_removed); ErrNotFound if there was none.
	RemoveTaskTypeOverride(ctx context.Context, taskType string) error
	// Resolve returns the route for a task type: the override if any, else
	// the one manifest route. No route: ErrNotFound. Several packs serve it
	// and no override chooses: ErrConflict naming them.
	Resolve(ctx context.Context, taskType string) (TaskTypeRoute, error)
	// ListTaskTypes returns every route, overrides and manifest routes, by
	// task type.
	ListTaskTypes(ctx context.Context) ([]TaskTypeRoute, error)
}

// TaskTypeSpecs stores the operator's TaskTypeSpec of each task type
// (the agent runtime schema §13), apart from its route: a spec applies whichever pack
// serves the type. The dispatcher and the Host apply it (defaults, allowed
// skills, artifact roles, success policy); the store only keeps it.
type TaskTypeSpecs interface {
	// SetTaskTypeSpec stores spec, replacing the type's (event
	// task_type_spec_set).
	SetTaskTypeSpec(ctx context.Context, spec TaskTypeSpec) error
	// RemoveTaskTypeSpec drops a spec (event task_type_spec_removed);
	// ErrNotFound if there was none.
	RemoveTaskTypeSpec(ctx context.Context, taskType string) error
	// TaskTypeSpec returns the type's spec; ErrNotFound if none is set.
	TaskTypeSpec(ctx context.Context, taskType string) (TaskTypeSpec, error)
	// ListTaskTypeSpecs returns every spec by task type.
	ListTaskTypeSpecs(ctx context.Context) ([]TaskTypeSpec, error)
}

// TaskSetups is what a backend may also implement to answer in one read
// what a dispatcher reads of it to start a task (a store across a
// network: one round trip instead of three).
type TaskSetups interface {
	// TaskSetup reads taskType's route, its spec and every agent at
	// once.
	TaskSetup(ctx context.Context, taskType string) (*TaskSetup, error)
}

// TaskSetup is what TaskSetups.TaskSetup read: each part with the error
// its own call (TaskTypes.Resolve, TaskTypeSpecs.TaskTypeSpec,
// Agents.ListAgents) would have returned.
type TaskSetup struct {
	Route     TaskTypeRoute
	RouteErr  error
	Spec      TaskTypeSpec
	SpecErr   error // ErrNotFound: no spec is set
	Agents    []AgentRecord
	AgentsErr error
}

// Events of task type specs.
const (
	EventTaskTypeSpecSet     = "task_type_spec_set"
	EventTaskTypeSpecRemoved = "task_type_spec_removed"
)

// Route origins.
const (
	OriginManifest = "manifest"
	OriginOperator = "operator"
)

// SuccessPolicy is TaskTypeSpec.success_policy.
type SuccessPolicy struct {
	RequireArtifacts         bool `json:"require_artifacts,omitempty"`
	RequireAdapterAudit      bool `json:"require_adapter_audit,omitempty"`
	VerifyClaimedFileChanges bool `json:"verify_claimed_file_changes,omitempty"`
}

// TaskTypeSpec is the task type registry entry of the schema (§13). The
// store keeps it (TaskTypeSpecs; an override route carries one too) and
// hands it back; the dispatcher and the Host act on it.
type TaskTypeSpec struct {
	TaskType         string         `json:"task_type"`
	PayloadSchemaID  string         `json:"payload_schema_id,omitempty"`
	DefaultProfileID string         `json:"default_profile_id,omitempty"`
	DefaultAdapterID string         `json:"default_adapter_id,omitempty"`
	DefaultModel     string         `json:"default_model,omitempty"`
	AllowedSkillIDs  []string       `json:"allowed_skill_ids,omitempty"`
	ArtifactRoles    []string       `json:"artifact_roles,omitempty"`
	SuccessPolicy    *SuccessPolicy `json:"success_policy,omitempty"`
}

// TaskTypeInfo is what a home knows of one task type: the operator's spec
// (nil when none is set), every route (operator override first, then the
// manifest routes) and the route that wins, if any.
type TaskTypeInfo struct {
	TaskType string          `json:"task_type"`
	Spec     *TaskTypeSpec   `json:"spec,omitempty"`
	Routes   []TaskTypeRoute `json:"routes"`
	// Resolved is the route tasks of the type run on; nil when none
	// serves it, or several do and no override chooses (Error says).
	Resolved *TaskTypeRoute `json:"resolved,omitempty"`
	Error    string         `json:"error,omitempty"`
}

// TaskTypeRoute says which node runs a task type.
type TaskTypeRoute struct {
	TaskTypeSpec
	// Pack is a pack reference as the registry resolves it: a name (the
	// newest installed version) or name@version.
	Pack string `json:"pack"`
	// Node is the typeId of the node.
	Node string `json:"node"`
	// Origin is OriginManifest or OriginOperator (set by the store).
	Origin string `json:"origin"`
}

// CheckRoute validates a route's names.
func CheckRoute(op string, r *TaskTypeRoute) error {
	probe := TaskIntent{TaskType: r.TaskType, Source: "x", Payload: []byte("{}")}
	if err := ValidateIntent(&probe); err != nil {
		e := err.(*Error)
		e.Op = op
		return e
	}
	if err := checkName(op, "pack", r.Pack, maxShortText, false); err != nil {
		return err
	}
	return checkName(op, "node", r.Node, maxShortText, false)
}

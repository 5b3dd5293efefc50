package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Workflow events (the agent runtime schema §14, and the ones packrun adds).
const (
	// EventWorkflowTransitioned: a signal moved a record from one state
	// to another (data.workflow_id, from_state, to_state, signal).
	EventWorkflowTransitioned = "workflow_transitioned"
	// EventWorkflowCompleted: a completion signal completed a record.
	EventWorkflowCompleted = "workflow_completed"
	// EventWorkflowTaskCreated: a record entered a state that emits a task
	// intent and the task was enqueued (the event's task_id is that task).
	EventWorkflowTaskCreated = "workflow_task_created"
	// EventSensorWorkflowCreated: a sensor event's proposed_workflow
	// created a record.
	EventSensorWorkflowCreated = "sensor_workflow_created"
	// EventSensorWorkflowDeduped: a sensor event's proposed_workflow named
	// a record that exists (same workflow_type and instance_key): nothing
	// of it changes, except that a blocked record is woken (data.woken:
	// active again, its current state entered again).
	EventSensorWorkflowDeduped = "sensor_workflow_deduped"
	// EventWorkflowCreated: an operator started a record (not in §14,
	// which names only the sensor path).
	EventWorkflowCreated = "workflow_created"
	// EventWorkflowBlocked: a verified signal matched neither a transition
	// nor a completion signal of the record's state, so the record is
	// blocked (data.signal names it); or the transition it asked for
	// would pass the workflow_steps quota (data.reason names the quota
	// and its limit). Not in §14.
	EventWorkflowBlocked = "workflow_blocked"
	// EventWorkflowCanceled: an operator canceled a record. Not in §14.
	EventWorkflowCanceled = "workflow_canceled"
	// EventWorkflowUpserted: a definition was registered or replaced.
	EventWorkflowUpserted = "workflow_upserted"
)

// Schema ids of the workflow records.
const (
	WorkflowDefinitionSchema = "agent-runtime/workflow.definition/v1"
	WorkflowRecordSchema     = "agent-runtime/workflow.record/v1"
)

// GoalLoop is the workflow_type of the built-in goal loop (the agent runtime schema §10):
// plan → execute → verify → complete, verify able to send the work back
// to execute. Every store registers it when it is created.
const GoalLoop = "goal-loop"

// WorkflowState is one state of a WorkflowDefinition.
type WorkflowState struct {
	StateID          string               `json:"state_id"`
	TaskType         string               `json:"task_type,omitempty"`
	DefaultProfileID string               `json:"default_profile_id,omitempty"`
	DefaultSkillIDs  []string             `json:"default_skill_ids,omitempty"`
	Transitions      []WorkflowTransition `json:"transitions,omitempty"`
	// CompletionSignals complete the record when they are signalled in
	// this state (after the transition of the same signal, if any).
	CompletionSignals []string `json:"completion_signals,omitempty"`
	// EmitsTaskIntent: entering this state enqueues a task of TaskType.
	EmitsTaskIntent bool `json:"emits_task_intent,omitempty"`
}

// WorkflowTransition moves a record to NextState when Signal is signalled.
type WorkflowTransition struct {
	Signal    string `json:"signal"`
	NextState string `json:"next_state"`
}

// WorkflowDefinition is data-backed workflow logic (the agent runtime schema §10, field
// names as written there). Definitions are shared by every tenant, like
// task types.
type WorkflowDefinition struct {
	WorkflowType string          `json:"workflow_type"`
	InitialState string          `json:"initial_state"`
	States       []WorkflowState `json:"states"`
}

// State returns the state named id, or nil.
func (d *WorkflowDefinition) State(id string) *WorkflowState {
	for i := range d.States {
		if d.States[i].StateID == id {
			return &d.States[i]
		}
	}
	return nil
}

// Next returns the state signal leads to from s ("" when no transition of
// s matches).
func (s *WorkflowState) Next(signal string) string {
	for _, t := range s.Transitions {
		if t.Signal == signal {
			return t.NextState
		}
	}
	return ""
}

// Completes reports whether signal is one of s's completion signals.
func (s *WorkflowState) Completes(signal string) bool {
	for _, c := range s.CompletionSignals {
		if c == signal {
			return true
		}
	}
	return false
}

// WorkflowStatus is a record's status. Canceled is packrun's addition to
// the spec's three: an operator's cancel.
type WorkflowStatus string

const (
	WorkflowActive    WorkflowStatus = "active"
	WorkflowCompleted WorkflowStatus = "completed"
	WorkflowBlocked   WorkflowStatus = "blocked"
	WorkflowCanceled  WorkflowStatus = "canceled"
)

// WorkflowRecord is one running instance of a workflow (the agent runtime schema §11,
// field names as written there), unique per (tenant, workflow_type,
// instance_key).
type WorkflowRecord struct {
	WorkflowID   string          `json:"workflow_id"`
	WorkflowType string          `json:"workflow_type"`
	InstanceKey  string          `json:"instance_key"`
	CurrentState string          `json:"current_state"`
	Context      json.RawMessage `json:"context"`
	Status       WorkflowStatus  `json:"status"`
	CreatedAt    time.Time       `json:"created_at"`
	UpdatedAt    time.Time       `json:"updated_at"`
	CompletedAt  *time.Time      `json:"completed_at"`
	// Tenant owns the record and the tasks it creates.
	Tenant string `json:"tenant"`
	// Transitions counts the state transitions the record has made; past
	// the workflow_steps quota (internal/quota) it is blocked.
	Transitions int `json:"transitions"`
}

// WorkflowStart creates a record.
type WorkflowStart struct {
	WorkflowType string
	InstanceKey  string
	// State is the state to start in; "" is the definition's
	// initial_state.
	State string
	// Context is a JSON object (or empty: null).
	Context json.RawMessage
	// Tenant "" is DefaultTenant.
	Tenant string
}

// WorkflowRecordFilter selects records, newest first.
type WorkflowRecordFilter struct {
	Tenant       string // "": every tenant
	WorkflowType string // "": every type
	InstanceKey  string // "": every key
	Limit        int    // 0: 100
}

// Workflows stores workflow definitions and records (the agent runtime schema §10, §11)
// and applies verified signals to records.
//
// Progression happens inside the queue: when Finish completes a task
// whose workflow_ref names a record, the outcome's workflow_signal is
// applied in the same transaction. In the record's current state (it must
// be the ref's state_id and the record active; otherwise the signal is
// stale and ignored, as the task_attempt_finished event's data.workflow
// says), a matching transition moves the record (workflow_transitioned);
// if the signal is also a completion signal of that state the record
// completes (workflow_completed); otherwise entering a state that emits a
// task intent enqueues its task (workflow_task_created). A signal that
// matches neither blocks the record (workflow_blocked).
//
// A task intent's workflow_ref must name an existing record of the
// task's tenant (workflow_id, with its instance_key) and a state of its
// definition; enqueueing does not create records.
type Workflows interface {
	// PutWorkflow validates and stores a definition, replacing the one of
	// the same workflow_type (event workflow_upserted). Existing records
	// keep their state; a state the new definition lacks blocks their
	// next signal.
	PutWorkflow(ctx context.Context, def *WorkflowDefinition) (replaced bool, err error)
	// Workflow returns one definition.
	Workflow(ctx context.Context, workflowType string) (*WorkflowDefinition, error)
	// ListWorkflows returns every definition, by workflow_type.
	ListWorkflows(ctx context.Context) ([]*WorkflowDefinition, error)
	// StartWorkflow creates a record (event workflow_created), or returns
	// the tenant's existing record of that workflow_type and instance_key
	// with created false (nothing written). A start state that emits a
	// task intent enqueues its task in the same write.
	StartWorkflow(ctx context.Context, start WorkflowStart) (rec *WorkflowRecord, created bool, err error)
	// WorkflowRecord returns one record; another tenant's is ErrNotFound
	// ("" tenant: any).
	WorkflowRecord(ctx context.Context, tenant, workflowID string) (*WorkflowRecord, error)
	// ListWorkflowRecords returns records, newest first.
	ListWorkflowRecords(ctx context.Context, f WorkflowRecordFilter) ([]*WorkflowRecord, error)
	// CancelWorkflowRecord cancels an active or blocked record (event
	// workflow_canceled); its tasks are not touched. A completed or
	// canceled record is ErrConflict.
	CancelWorkflowRecord(ctx context.Context, tenant, workflowID string) (*WorkflowRecord, error)
}

// WorkflowSource is the source of the tasks a record creates.
func WorkflowSource(workflowID string) string { return "workflow:" + workflowID }

// DecodeWorkflowDefinition decodes a definition from untrusted bytes:
// validated against its published schema (errors name the JSON path),
// then ValidateWorkflowDefinition.
func DecodeWorkflowDefinition(b []byte) (*WorkflowDefinition, error) {
	const op = "workflow"
	if len(b) > MaxConfigRecordBytes {
		return nil, &Error{Op: op, Err: &reason{"file too large", ErrTooLarge}}
	}
	if !json.Valid(b) {
		return nil, Invalid(op, "", "not valid JSON")
	}
	d := &WorkflowDefinition{}
	if err := decodePart(op, WorkflowDefinitionSchema, "", b, d); err != nil {
		return nil, err
	}
	if err := ValidateWorkflowDefinition(d); err != nil {
		return nil, err
	}
	return d, nil
}

// DecodeWorkflowRecord decodes a record from untrusted bytes, validated
// against its published schema.
func DecodeWorkflowRecord(b []byte) (*WorkflowRecord, error) {
	const op = "workflow record"
	if !json.Valid(b) {
		return nil, Invalid(op, "", "not valid JSON")
	}
	if err := validateSchema(op, WorkflowRecordSchema, "", b); err != nil {
		return nil, err
	}
	r := &WorkflowRecord{}
	if err := strictDecode(op, b, r); err != nil {
		return nil, err
	}
	return r, nil
}

// ValidateWorkflowDefinition checks the rules the schema cannot: state ids
// unique; initial_state and every next_state name a state; a state that
// emits a task intent names its task_type; a state's transitions have
// distinct signals; a transition on a completion signal does not lead to
// a state that emits a task intent (the record is complete then, so the
// task would never be wanted). Names follow the schema's limits and
// carry no control characters.
func ValidateWorkflowDefinition(d *WorkflowDefinition) error {
	const op = "workflow"
	if err := checkName(op, "workflow_type", d.WorkflowType, maxTaskTypeBytes, false); err != nil {
		return err
	}
	if len(d.States) == 0 {
		return Invalid(op, "states", "at least one state is required")
	}
	seen := map[string]int{}
	for i, s := range d.States {
		f := fmt.Sprintf("states[%d]", i)
		if err := checkName(op, f+".state_id", s.StateID, maxShortText, false); err != nil {
			return err
		}
		if j, dup := seen[s.StateID]; dup {
			return Invalid(op, f+".state_id", "%q is also states[%d].state_id", s.StateID, j)
		}
		seen[s.StateID] = i
		if s.EmitsTaskIntent && s.TaskType == "" {
			return Invalid(op, f+".task_type", "required: the state emits a task intent")
		}
		if err := checkStateIntent(op, f, &s); err != nil {
			return err
		}
	}
	if d.State(d.InitialState) == nil {
		return Invalid(op, "initial_state", "%q names no state", d.InitialState)
	}
	for i := range d.States {
		if err := checkStateSignals(op, d, i); err != nil {
			return err
		}
	}
	return nil
}

// checkStateIntent checks that the task intent state s would emit is
// valid (ValidateIntent's rules for task_type, the profile and the
// skills), naming the state's fields, so that entering it never fails.
func checkStateIntent(op, prefix string, s *WorkflowState) error {
	if s.TaskType == "" {
		return nil
	}
	probe := TaskIntent{TaskType: s.TaskType, Source: "workflow", RequestedProfileID: s.DefaultProfileID, SkillIDs: s.DefaultSkillIDs,
		Payload: json.RawMessage(`{}`)}
	err := ValidateIntent(&probe)
	var he *Error
	if !errors.As(err, &he) {
		return err
	}
	field := strings.NewReplacer("requested_profile_id", "default_profile_id", "skill_ids", "default_skill_ids").Replace(he.Field)
	return &Error{Op: op, Field: prefix + "." + field, Err: he.Err}
}

// checkStateSignals checks the transitions of d.States[i].
func checkStateSignals(op string, d *WorkflowDefinition, i int) error {
	s := &d.States[i]
	signals := map[string]bool{}
	for j, t := range s.Transitions {
		f := fmt.Sprintf("states[%d].transitions[%d]", i, j)
		if signals[t.Signal] {
			return Invalid(op, f+".signal", "%q has another transition in this state", t.Signal)
		}
		signals[t.Signal] = true
		next := d.State(t.NextState)
		if next == nil {
			return Invalid(op, f+".next_state", "%q names no state", t.NextState)
		}
		if s.Completes(t.Signal) && next.EmitsTaskIntent {
			return Invalid(op, f+".next_state", "%q emits a task intent but %q completes the workflow", t.NextState, t.Signal)
		}
	}
	return nil
}

// ValidateWorkflowStart checks a start as StartWorkflow does (apart from
// the definition, which the store looks up).
func ValidateWorkflowStart(op string, st *WorkflowStart) error {
	if err := checkName(op, "workflow_type", st.WorkflowType, maxTaskTypeBytes, false); err != nil {
		return err
	}
	if err := checkName(op, "instance_key", st.InstanceKey, maxShortText, false); err != nil {
		return err
	}
	if err := checkName(op, "state", st.State, maxShortText, true); err != nil {
		return err
	}
	if len(st.Context) > 0 && string(st.Context) != "null" {
		if err := checkObject(op, "context", st.Context); err != nil {
			return err
		}
	}
	if st.Tenant != "" {
		return CheckTenant(op, st.Tenant)
	}
	return nil
}

package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host/schema"
	"github.com/packrun/packrun/internal/textclip"
)

// Queue is the task queue of the agent runtime schema: TaskIntents go in,
// TaskRecords move pending → running → completed | retryable_failure |
// permanent_failure | blocked | operator_canceled.
//
// Order: Claim takes the available task with the LOWEST priority number
// first (1 is the most urgent; the default is 5, as in the arc runtime the
// schema comes from), then the earliest available_at, then the order of
// enqueueing. A task is available when its status is pending or
// retryable_failure and its available_at has come.
type Queue interface {
	// Enqueue validates an intent and stores it as a pending task
	// (event task_enqueued). Validation errors name the field.
	Enqueue(ctx context.Context, intent TaskIntent, opts EnqueueOptions) (*TaskRecord, error)
	// Claim atomically moves the next available task to running,
	// increments its attempt_count and records task_claimed. It returns
	// ErrEmpty when no task is available at now. No task is ever handed to
	// two claimers, even from two processes on the same database.
	Claim(ctx context.Context, runnerID string, now time.Time) (*TaskRecord, error)
	// Finish settles a running task from one recorded attempt; see
	// FinishInput for the rules. It returns the updated record.
	Finish(ctx context.Context, taskID string, in FinishInput) (*TaskRecord, error)
	// Task returns one task.
	Task(ctx context.Context, taskID string) (*TaskRecord, error)
	// ListTasks returns tasks, newest first.
	ListTasks(ctx context.Context, f TaskFilter) ([]*TaskRecord, error)
	// CountTasks returns how many tasks are in each status (a status with
	// none may be absent).
	CountTasks(ctx context.Context) (map[TaskStatus]int, error)
	// Cancel is the operator control. A pending, retryable_failure or
	// blocked task becomes operator_canceled at once. A running task is
	// marked cancel_requested (event task_cancel_requested) and becomes
	// operator_canceled when its attempt finishes or is reclaimed, whatever
	// the attempt's outcome; its follow-ups are never applied. A task that
	// is already completed, permanently failed or canceled gives ErrConflict.
	Cancel(ctx context.Context, taskID string) (*TaskRecord, error)
	// Resume is the operator control for a task whose node suspended
	// (openwop_interrupt): a blocked task whose latest attempt is
	// suspended goes back to pending, available at once, with value
	// appended to its ResumeValues; its next attempt re-runs the node
	// with all of them, each returned by one openwop_interrupt in order.
	// If the task has no attempts left, max_attempts grows by one. by
	// names who asked (event task_resumed). Another status, or a blocked
	// task whose latest attempt did not suspend, gives ErrConflict; a
	// value that is not JSON, or past MaxResumeValues / MaxResumeBytes,
	// a validation error naming "value".
	Resume(ctx context.Context, taskID string, value json.RawMessage, by string) (*TaskRecord, error)
	// Retry is the operator control for a failed or blocked task: a
	// permanent_failure, retryable_failure or blocked task goes back to
	// pending, available at once, for a new attempt (its resume values
	// kept). If it has no attempts left, max_attempts grows by one, so
	// that exactly one more attempt may run before a retryable failure is
	// permanent again. by names who asked (event task_retry_requested).
	// Another status gives ErrConflict.
	Retry(ctx context.Context, taskID string, by string) (*TaskRecord, error)
	// Outbox returns the outbox messages of a task (the external_messages
	// of its completed outcome), oldest first.
	Outbox(ctx context.Context, taskID string) ([]*OutboxMessage, error)
	// ReclaimRunning is the boot sweep: every task left running (by a
	// crash) is settled, with event boot_sweep_reclaimed. The interrupted
	// attempt counts: the task becomes retryable_failure available at now,
	// or permanent_failure when it has no attempts left, or
	// operator_canceled if cancel was requested. Call it only while holding
	// the dispatch lock, before claiming anything: it assumes no other
	// runner is alive. Completed tasks are never touched.
	ReclaimRunning(ctx context.Context, now time.Time) (int, error)
}

// Locker is the dispatch lock: one row naming its holder and expiry, so
// that one dispatcher at a time claims tasks from a database.
type Locker interface {
	// AcquireDispatchLock takes the lock for ttl (event dispatch_locked),
	// or extends it when holder already has it. A lock past its expiry is
	// cleared first (event dispatch_lock_stale_cleared). Held by another
	// holder: ErrLocked, naming the holder and the expiry.
	AcquireDispatchLock(ctx context.Context, holder string, ttl time.Duration) (*DispatchLock, error)
	// ReleaseDispatchLock releases the lock held by holder (event
	// dispatch_lock_released); ErrNotFound if holder does not hold it.
	ReleaseDispatchLock(ctx context.Context, holder string) error
}

// DispatchLock describes the held dispatch lock.
type DispatchLock struct {
	Holder     string    `json:"holder"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// TaskStatus is a TaskRecord status.
type TaskStatus string

const (
	TaskPending          TaskStatus = "pending"
	TaskRunning          TaskStatus = "running"
	TaskCompleted        TaskStatus = "completed"
	TaskRetryableFailure TaskStatus = "retryable_failure"
	TaskPermanentFailure TaskStatus = "permanent_failure"
	TaskBlocked          TaskStatus = "blocked"
	TaskOperatorCanceled TaskStatus = "operator_canceled"
)

// Terminal reports whether nothing moves a task out of this status.
func (s TaskStatus) Terminal() bool {
	return s == TaskCompleted || s == TaskPermanentFailure || s == TaskOperatorCanceled
}

// Retriable reports whether Queue.Retry accepts a task in this status
// (permanent_failure, retryable_failure, blocked): the one rule both
// stores apply and the console offers its Retry button by.
func (s TaskStatus) Retriable() bool {
	return s == TaskPermanentFailure || s == TaskRetryableFailure || s == TaskBlocked
}

// Valid reports whether s is one of the seven statuses.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskPending, TaskRunning, TaskCompleted, TaskRetryableFailure, TaskPermanentFailure, TaskBlocked, TaskOperatorCanceled:
		return true
	}
	return false
}

// MachineStatus is TaskOutcome.machine_status.
type MachineStatus string

const (
	MachineOK         MachineStatus = "ok"
	MachineNeedsRetry MachineStatus = "needs_retry"
	MachineBlocked    MachineStatus = "blocked"
	MachineFailed     MachineStatus = "failed"
	MachineCanceled   MachineStatus = "canceled"
)

// RetryClass is TaskAttempt.retry_class.
type RetryClass string

const (
	RetryNone      RetryClass = "none"
	RetryRetryable RetryClass = "retryable"
	RetryPermanent RetryClass = "permanent"
)

// ExitStatus is TaskAttempt.exit_status.
type ExitStatus string

const (
	ExitOK      ExitStatus = "ok"
	ExitError   ExitStatus = "error"
	ExitTimeout ExitStatus = "timeout"
)

// Queue defaults and limits.
const (
	DefaultPriority    = 5
	DefaultMaxAttempts = 3
	MaxMaxAttempts     = 100
	MaxPayloadBytes    = 1 << 20
	MaxDelayMinutes    = 366 * 24 * 60
	// MaxFollowUps and MaxFollowUpBytes cap the follow-up intents one
	// attempt may stage (count, and their total JSON size); the bridge
	// should refuse the queue_enqueue call that would exceed them.
	MaxFollowUps     = 100
	MaxFollowUpBytes = 4 << 20
	// MaxResumeValues and MaxResumeBytes cap the resume values a task
	// collects (count, and their total JSON size).
	MaxResumeValues = 100
	MaxResumeBytes  = 1 << 20
	// MaxExternalMessages and MaxExternalMessageBytes cap an outcome's
	// external_messages (as abi.TaskOutcome does for a guest's).
	MaxExternalMessages     = abi.MaxExternalMessages
	MaxExternalMessageBytes = abi.MaxExternalMessageBytes
	maxTaskTypeBytes        = 128
	maxShortText            = 256
	maxSubjectBytes         = 1024
	maxDescription          = 64 << 10
	maxListItems            = 64
)

// WorkflowRef ties a task to a workflow state.
type WorkflowRef struct {
	WorkflowID  string `json:"workflow_id"`
	StateID     string `json:"state_id"`
	InstanceKey string `json:"instance_key"`
}

// Schedule delays a task relative to its enqueueing.
type Schedule struct {
	DelayMinutes int `json:"delay_minutes"`
}

// EvidenceRequirements are checked by Finish before a task may complete.
type EvidenceRequirements struct {
	// RequiredArtifacts each name an artifact (its name, i.e.
	// relative_path, or its role) the finishing attempt must have stored.
	RequiredArtifacts []string `json:"required_artifacts,omitempty"`
	// RequireFileChangeVerification: every outcome.file_changes entry must
	// be an artifact of the attempt.
	RequireFileChangeVerification bool `json:"require_file_change_verification,omitempty"`
	// RequireAdapterAudit: the attempt must have an adapter-audit artifact.
	RequireAdapterAudit bool `json:"require_adapter_audit,omitempty"`
}

// TaskIntent is the portable unit of work sensors, operators, workflows and
// skills create (schema §6).
type TaskIntent struct {
	TaskType    string `json:"task_type"`
	Source      string `json:"source"`
	Subject     string `json:"subject,omitempty"`
	Description string `json:"description,omitempty"`
	// Priority orders the queue, lowest number first; nil means 5.
	Priority           *int         `json:"priority,omitempty"`
	RequestedProfileID string       `json:"requested_profile_id,omitempty"`
	RequestedAdapterID string       `json:"requested_adapter_id,omitempty"`
	RequestedModel     string       `json:"requested_model,omitempty"`
	SkillIDs           []string     `json:"skill_ids,omitempty"`
	WorkflowRef        *WorkflowRef `json:"workflow_ref,omitempty"`
	// Schedule and AvailableAt (RFC 3339) delay availability; at most one
	// may be given.
	Schedule             *Schedule             `json:"schedule,omitempty"`
	AvailableAt          string                `json:"available_at,omitempty"`
	Payload              json.RawMessage       `json:"payload"`
	EvidenceRequirements *EvidenceRequirements `json:"evidence_requirements,omitempty"`
}

// Priority returns a pointer to p, for TaskIntent.Priority.
func Priority(p int) *int { return &p }

// EnqueueOptions adjust Enqueue.
type EnqueueOptions struct {
	// MaxAttempts caps the attempts (claims) of the task; 0 means 3.
	MaxAttempts int
	// Tenant is the tenant the task (and its attempts and follow-ups)
	// belongs to; "" is DefaultTenant. The API sets it from the
	// caller's token, never from the request body.
	Tenant string
}

// TaskOutcome is the normalised result of an attempt (schema §9). Finish
// sets Status to the status it decided.
type TaskOutcome struct {
	Status          TaskStatus        `json:"status"`
	MachineStatus   MachineStatus     `json:"machine_status"`
	OperatorSummary string            `json:"operator_summary"`
	RawOutput       string            `json:"raw_output,omitempty"`
	FileChanges     []string          `json:"file_changes,omitempty"`
	ArtifactPaths   []string          `json:"artifact_paths,omitempty"`
	WorkflowSignal  string            `json:"workflow_signal,omitempty"`
	FollowUpTasks   []TaskIntent      `json:"follow_up_tasks,omitempty"`
	ExternalMessage []json.RawMessage `json:"external_messages,omitempty"`
}

// TaskRecord is engine state (schema §7), plus the intent fields that later
// stages need and a few runtime fields (parent, runner, cancel request).
type TaskRecord struct {
	TaskID               string                `json:"task_id"`
	TaskType             string                `json:"task_type"`
	Source               string                `json:"source"`
	Subject              string                `json:"subject"`
	Description          string                `json:"description"`
	Priority             int                   `json:"priority"`
	Payload              json.RawMessage       `json:"payload"`
	RequestedProfileID   string                `json:"requested_profile_id"`
	RequestedAdapterID   string                `json:"requested_adapter_id"`
	RequestedModel       string                `json:"requested_model"`
	SkillIDs             []string              `json:"skill_ids,omitempty"`
	WorkflowRef          *WorkflowRef          `json:"workflow_ref,omitempty"`
	EvidenceRequirements *EvidenceRequirements `json:"evidence_requirements,omitempty"`
	Status               TaskStatus            `json:"status"`
	MaxAttempts          int                   `json:"max_attempts"`
	AttemptCount         int                   `json:"attempt_count"`
	AvailableAt          time.Time             `json:"available_at"`
	CreatedAt            time.Time             `json:"created_at"`
	UpdatedAt            time.Time             `json:"updated_at"`
	StartedAt            *time.Time            `json:"started_at"`
	FinishedAt           *time.Time            `json:"finished_at"`
	Outcome              *TaskOutcome          `json:"outcome"`
	LastError            string                `json:"last_error"`
	// ParentTaskID is set on follow-ups; their source is "task:<parent>".
	ParentTaskID string `json:"parent_task_id,omitempty"`
	// RunnerID is the runner of the latest claim.
	RunnerID        string `json:"runner_id,omitempty"`
	CancelRequested bool   `json:"cancel_requested,omitempty"`
	// ResumeValues are the values operators resumed the task with (see
	// Queue.Resume), oldest first: each attempt's node gets them back
	// from its successive openwop_interrupt calls.
	ResumeValues []json.RawMessage `json:"resume_values,omitempty"`
	// Tenant is the tenant the task belongs to.
	Tenant string `json:"tenant"`
}

// FinishInput settles a running task. AttemptID names the attempt, which
// must have been recorded (Evidence.RecordAttempt) for this task with
// Attempt == the task's attempt_count; an older attempt is refused as stale
// (ErrConflict). AttemptID may be empty to settle a task whose node could
// not even be started (unknown task type, pack not installed, module
// refused): such a task can fail, block or be canceled, never complete.
//
// The status is decided in this order:
//   - cancel requested, or machine_status "canceled" → operator_canceled;
//   - machine_status "ok" and the evidence present (a recorded attempt;
//     every required artifact, every outcome.artifact_paths entry and what
//     the other evidence_requirements ask for, stored for this attempt)
//     → completed;
//   - machine_status "blocked" → blocked;
//   - retryable (machine_status "needs_retry", or "ok" with evidence
//     missing, or RetryClass "retryable"; never with RetryClass
//     "permanent") with attempts left → retryable_failure, available again
//     after the backoff (event task_retry_scheduled);
//   - anything else → permanent_failure.
//
// FollowUps (the intents the skill enqueued during the attempt, and those
// of its outcome's follow_up_tasks) are staged:
// recorded in the task_attempt_finished event whatever happens, and
// enqueued (source "task:<id>", event task_enqueued) in the same
// transaction only when the task completes. If the attempt staged more than
// MaxFollowUps, more than MaxFollowUpBytes of payload, or an invalid
// intent (or FollowUpsRefused says why the caller could not read one),
// none is applied and the task becomes permanent_failure (the guest's
// doing must not leave a task running). Outcome.FollowUpTasks are
// recorded with the outcome but only FollowUps are applied.
//
// Outcome.ExternalMessages (each a JSON object; at most
// MaxExternalMessages of MaxExternalMessageBytes) are kept in the outbox,
// pending, when the task completes (see Queue.Outbox); nothing delivers
// them yet.
//
// Finish fails only for the caller's mistakes (unknown or not running task,
// unrecorded or stale attempt, unknown machine_status or retry_class); the
// task is then unchanged.
type FinishInput struct {
	AttemptID string
	// Record, when set, is the attempt to record (as RecordAttempt does)
	// in the same write as the settlement; AttemptID is taken from it. If
	// the task cannot be settled (ErrConflict) the task is left as it is
	// and the attempt is not recorded — except on a backend whose nodes
	// hold leases (PostgreSQL) when the caller's claim was taken from it
	// (its lease reclaimed, the task claimed again): then the attempt is
	// recorded as evidence of what the node ran after losing its lease.
	Record *Attempt
	// Claimed, when set, is the record Claim returned for this task. The
	// fields no queue operation changes while the task runs (type,
	// payload, requirements, max_attempts, resume values...) are taken
	// from it instead of being read again; the rest is read as always.
	Claimed    *TaskRecord
	Outcome    TaskOutcome
	RetryClass RetryClass // empty means none
	Error      string     // becomes last_error
	FollowUps  []TaskIntent
	// FollowUpsRefused, if set, says why the attempt's follow-ups are
	// refused (one the caller could not decode): none is applied and the
	// task fails as for an invalid one.
	FollowUpsRefused string
	// SensorEvents are the sensor events the attempt reported (decoded
	// and validated: DecodeSensorEvent). When the task completes they
	// are applied in the same transaction, in order, as
	// Sensors.RecordSensorEvent does (the task's tenant, origin
	// "task:<id>"); an event whose proposed_task routes nowhere is
	// recorded as refused. Otherwise they are dropped.
	SensorEvents []SensorEvent
	// Messages are the messages the attempt published (message_publish,
	// and its outcome's external_messages in a message format), decoded
	// and validated. When the task completes they are accepted in the
	// same transaction, in order, as Messages.PublishMessage does; one
	// the bus refuses (out of its sender's chain, an id reused with other
	// content) is left out with a message_refused event. Otherwise they
	// are dropped.
	Messages []MessageInput
	// Bundle, when set with Record, is the data of the bundle_compiled
	// event appended just before the attempt (what the attempt ran as:
	// task, attempt, agent, profile, constitution and bundle hashes).
	Bundle json.RawMessage
}

// OutboxMessage is one external message of a completed task's outcome,
// kept until a handler delivers it (status pending until then).
type OutboxMessage struct {
	MessageID string          `json:"message_id"`
	TaskID    string          `json:"task_id"`
	AttemptID string          `json:"attempt_id"`
	Tenant    string          `json:"tenant"`
	Message   json.RawMessage `json:"message"`
	Status    string          `json:"status"`
	CreatedAt time.Time       `json:"created_at"`
}

// OutboxPending is the status of an outbox message not delivered yet.
const OutboxPending = "pending"

// DefaultListLimit is how many tasks or attempts a list without a limit
// returns (TaskFilter.Limit, AttemptFilter.Limit 0).
const DefaultListLimit = 100

// TaskFilter selects tasks for ListTasks.
type TaskFilter struct {
	Status   TaskStatus // empty: any
	TaskType string     // empty: any
	Tenant   string     // empty: any
	// After is a keyset cursor: the task_id of the last task of the
	// previous page; the tasks listed after it (older ones, in the same
	// newest-first order) are returned. A task that does not exist lists
	// none. Empty: from the newest.
	After string
	Limit int // 0 means 100
}

// ValidateIntent checks an intent as Enqueue does and returns the first
// problem as a validation *Error naming the field (op "task intent"). The
// runtime bridge can call it when a skill enqueues, before staging.
func ValidateIntent(in *TaskIntent) error {
	const op = "task intent"
	if in.TaskType == "" {
		return Invalid(op, "task_type", "required")
	}
	if len(in.TaskType) > maxTaskTypeBytes {
		return Invalid(op, "task_type", "is %d bytes; the limit is %d", len(in.TaskType), maxTaskTypeBytes)
	}
	for _, r := range in.TaskType {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-:/", r)) {
			return Invalid(op, "task_type", "may contain only letters, digits and . _ - : /")
		}
	}
	if err := checkName(op, "source", in.Source, maxShortText, false); err != nil {
		return err
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"subject", in.Subject, maxSubjectBytes},
		{"description", in.Description, maxDescription},
		{"requested_profile_id", in.RequestedProfileID, maxShortText},
		{"requested_adapter_id", in.RequestedAdapterID, maxShortText},
		{"requested_model", in.RequestedModel, maxShortText},
	} {
		if len(f.v) > f.max {
			return Invalid(op, f.name, "is %d bytes; the limit is %d", len(f.v), f.max)
		}
	}
	if err := checkList(op, "skill_ids", in.SkillIDs); err != nil {
		return err
	}
	if w := in.WorkflowRef; w != nil {
		if w.WorkflowID == "" || w.StateID == "" || w.InstanceKey == "" {
			return Invalid(op, "workflow_ref", "workflow_id, state_id and instance_key are all required")
		}
	}
	if in.Schedule != nil {
		if in.Schedule.DelayMinutes < 0 || in.Schedule.DelayMinutes > MaxDelayMinutes {
			return Invalid(op, "schedule.delay_minutes", "must be between 0 and %d", MaxDelayMinutes)
		}
		if in.AvailableAt != "" {
			return Invalid(op, "available_at", "give either schedule.delay_minutes or available_at, not both")
		}
	}
	if in.AvailableAt != "" {
		if err := checkTime(op, "available_at", in.AvailableAt); err != nil {
			return err
		}
	}
	if err := checkObject(op, "payload", in.Payload); err != nil {
		return err
	}
	if er := in.EvidenceRequirements; er != nil {
		if err := checkList(op, "evidence_requirements.required_artifacts", er.RequiredArtifacts); err != nil {
			return err
		}
	}
	return nil
}

// checkTime refuses a value that is not an RFC 3339 time.
func checkTime(op, field, v string) error {
	if _, err := time.Parse(time.RFC3339, v); err != nil {
		return Invalid(op, field, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z")
	}
	return nil
}

func checkList(op, field string, items []string) error {
	if len(items) > maxListItems {
		return Invalid(op, field, "has %d entries; the limit is %d", len(items), maxListItems)
	}
	for i, s := range items {
		if err := checkName(op, fmt.Sprintf("%s[%d]", field, i), s, maxShortText, false); err != nil {
			return err
		}
	}
	return nil
}

func checkObject(op, field string, raw json.RawMessage) error {
	if len(raw) > MaxPayloadBytes {
		return &Error{Op: op, Field: field, Err: &reason{fmt.Sprintf("is %d bytes; the limit is %d", len(raw), MaxPayloadBytes), ErrTooLarge}}
	}
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !json.Valid(raw) {
		return Invalid(op, field, "must be a JSON object")
	}
	return nil
}

// IntentAvailableAt returns when a valid intent becomes available if it is
// enqueued at now.
func IntentAvailableAt(in *TaskIntent, now time.Time) time.Time {
	if in.AvailableAt != "" {
		t, _ := time.Parse(time.RFC3339, in.AvailableAt)
		return t.UTC()
	}
	if in.Schedule != nil {
		return now.Add(time.Duration(in.Schedule.DelayMinutes) * time.Minute).UTC()
	}
	return now.UTC()
}

// DecodeIntent decodes and validates a TaskIntent from untrusted JSON (a
// guest's queue_enqueue request, an API body). It validates against the
// published schema IntentSchema first (the field at fault is its JSON
// path: "priority", "skill_ids[]"), then decodes strictly and applies
// ValidateIntent's rules. Unknown fields are refused; type errors name the
// field ("priority: must be an integer").
func DecodeIntent(b []byte) (TaskIntent, error) {
	const op = "task intent"
	var in TaskIntent
	if len(b) > MaxPayloadBytes+64<<10 {
		return in, &Error{Op: op, Err: &reason{fmt.Sprintf("is %d bytes; the limit is %d", len(b), MaxPayloadBytes+64<<10), ErrTooLarge}}
	}
	if err := schema.Validate(IntentSchema, b); err != nil {
		return in, schemaInvalid(op, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &te) && te.Field != "":
			want := te.Type.Kind().String()
			switch want {
			case "int", "int64":
				want = "an integer"
			case "string":
				want = "a string"
			case "slice":
				want = "an array"
			case "struct", "ptr":
				want = "an object"
			}
			return in, Invalid(op, te.Field, "must be %s", want)
		}
		if name, ok := UnknownField(err); ok {
			return in, Invalid(op, name, "unknown field")
		}
		return in, Invalid(op, "", "not a JSON object: %s", textclip.Clip(strings.TrimPrefix(err.Error(), "json: "), 200))
	}
	if dec.More() {
		return in, Invalid(op, "", "trailing data after the object")
	}
	return in, ValidateIntent(&in)
}

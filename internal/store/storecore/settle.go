package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/evidence"
)

// EventTaskSettleRefused is appended when a settlement is refused because
// the caller's claim was taken from it (its lease was reclaimed, the task
// claimed again: see SettleTx.Leases): data.attempt and data.runner_id
// name the caller's claim, data.holder_attempt, data.holder_runner_id and
// data.status the task's. The caller's attempt, if it brought one, is
// recorded just before it: what a paused node did stays evidence.
const EventTaskSettleRefused = "task_settle_refused"

// SettleTx is a TaskTx that settles tasks: what differs between the
// backends in the queue's rules (the rules are Settle, InsertTask,
// CancelTask and Reclaim).
type SettleTx interface {
	TaskTx
	// LockTask reads the task to settle, locked until the transaction
	// ends; held is the caller's claim of it, if any (a driver may read
	// only what settling changes onto a copy of it).
	LockTask(ctx context.Context, op, taskID string, held *host.TaskRecord) (*host.TaskRecord, error)
	// RecordAttempt appends the attempt the driver prepared
	// (Finish.Prepared) to the evidence chain.
	RecordAttempt(ctx context.Context, prepared any) error
	// ApplyStaged applies what a completed attempt staged besides its
	// follow-ups and outbox: sensor events, published messages, its
	// workflow signal (what the signal did returned).
	ApplyStaged(ctx context.Context, t *host.TaskRecord, in *host.FinishInput, now time.Time) (string, error)
	// Leases reports whether claims hold leases that another node may
	// reclaim (PostgreSQL): settling then clears the lease, and the
	// attempt of a caller whose claim was taken from it is recorded
	// with EventTaskSettleRefused.
	Leases() bool
	Now() time.Time
	// Backoff is the delay before retry number n.
	Backoff(n int) time.Duration
	// ExecAll runs stmts in order, stopping at the first that fails: on
	// PostgreSQL in one network round trip (a pipeline), where settling
	// sends the statements whose outcome it does not read together.
	ExecAll(ctx context.Context, stmts []Stmt) error
}

// Stmt is one statement of SettleTx.ExecAll.
type Stmt struct {
	SQL  string
	Args []any
}

// Finish is a host.FinishInput checked (CheckFinish): what a settlement
// needs besides the task.
type Finish struct {
	host.FinishInput
	TaskID string
	// Prepared is the driver's prepared Record (for RecordAttempt).
	Prepared  any
	ms        host.MachineStatus
	rc        host.RetryClass
	followUps []host.TaskIntent
	refused   string
	// recordedAttempt is the number of the attempt AttemptID names, read
	// in the transaction (without a Record).
	recordedAttempt *int
}

// CheckFinish checks what Finish is given; prepare normalizes and encodes
// a Record (the driver's, kept in Prepared).
func CheckFinish(op, taskID string, in host.FinishInput, prepare func(*host.Attempt) (any, error)) (*Finish, error) {
	if err := host.CheckID(op, "task_id", taskID); err != nil {
		return nil, err
	}
	f := &Finish{FinishInput: in, TaskID: taskID, ms: in.Outcome.MachineStatus, rc: in.RetryClass}
	if a := in.Record; a != nil {
		var err error
		if f.Prepared, err = prepare(a); err != nil {
			return nil, err
		}
		if a.TaskID != taskID {
			return nil, host.Invalid(op, "record.task_id", "is %q, not the task being finished", a.TaskID)
		}
		f.AttemptID = a.AttemptID
	}
	if f.AttemptID != "" {
		if err := host.CheckID(op, "attempt_id", f.AttemptID); err != nil {
			return nil, err
		}
	}
	switch f.ms {
	case host.MachineOK, host.MachineNeedsRetry, host.MachineBlocked, host.MachineFailed, host.MachineCanceled:
	default:
		return nil, host.Invalid(op, "outcome.machine_status", "must be ok, needs_retry, blocked, failed or canceled")
	}
	if f.rc == "" {
		f.rc = host.RetryNone
	}
	if f.rc != host.RetryNone && f.rc != host.RetryRetryable && f.rc != host.RetryPermanent {
		return nil, host.Invalid(op, "retry_class", "must be none, retryable or permanent")
	}
	// Follow-ups are attributed to their parent whatever source the skill
	// claimed. Staging them is the guest's doing, so a problem with them
	// fails the task instead of refusing to settle it.
	f.followUps, f.refused = StageFollowUps(taskID, in.FollowUps)
	if in.FollowUpsRefused != "" {
		f.followUps, f.refused = nil, in.FollowUpsRefused
	}
	if err := CheckExternalMessages(op, in.Outcome.ExternalMessage); err != nil {
		return nil, err
	}
	return f, nil
}

// Settle settles f's task, fenced: the task must still be running on the
// caller's claim, i.e. its attempt_count is the caller's attempt number
// (Record.Attempt, the recorded AttemptID's, or Claimed's) and, where
// claims hold leases, its runner_id the caller's runner (Record.RunnerID
// or Claimed.RunnerID, when given). Otherwise fenced says why (ErrConflict) and nothing about
// the task changes (but see SettleTx.Leases); the caller commits what
// the transaction did and returns fenced. Settling, recording the
// attempt, applying the follow-ups and the outbox are the transaction's.
// It may run more than once for one f (a retried transaction).
func Settle(ctx context.Context, tx SettleTx, op string, f *Finish) (out *host.TaskRecord, fenced, err error) {
	t, err := tx.LockTask(ctx, op, f.TaskID, f.Claimed)
	if err != nil {
		return nil, nil, err
	}
	startedAt, err := finishingAttempt(ctx, tx, op, t, f)
	if err != nil {
		return nil, nil, err
	}
	if fenced = fence(t, f, tx.Leases()); fenced != nil {
		return nil, fenced, refuseSettle(ctx, tx, t, f)
	}
	out, err = settle(ctx, tx, op, t, f, startedAt)
	return out, nil, err
}

// finishingAttempt checks the attempt named by AttemptID (without a
// Record): recorded, for this task. It returns its started_at (the
// Record's, for a Record) and sets f's attempt number for the fence.
func finishingAttempt(ctx context.Context, tx SettleTx, op string, t *host.TaskRecord, f *Finish) (string, error) {
	f.recordedAttempt = nil
	if a := f.Record; a != nil {
		return host.FormatTime(a.StartedAt), nil
	}
	if f.AttemptID == "" {
		return "", nil
	}
	var attTask, attStarted string
	var attNum int
	err := tx.QueryRow(ctx, `SELECT task_id, attempt, started_at FROM attempt_records WHERE attempt_id = $1`, f.AttemptID).Scan(&attTask, &attNum, &attStarted)
	if errors.Is(err, ErrNoRows) {
		return "", host.Invalid(op, "attempt_id", "no attempt %s is recorded; record the attempt before finishing the task", f.AttemptID)
	}
	if err != nil {
		return "", err
	}
	if attTask != t.TaskID {
		return "", host.Invalid(op, "attempt_id", "attempt %s was not recorded for task %s", f.AttemptID, t.TaskID)
	}
	f.recordedAttempt = &attNum
	return attStarted, nil
}

// fence reports why the caller may not settle t, or nil if it may. The
// runner is checked only where claims hold leases: under SQLite a task
// claimed under one runner id may be run by a dispatcher of another.
func fence(t *host.TaskRecord, f *Finish, leases bool) error {
	if t.Status != host.TaskRunning {
		return host.Errorf("finish", t.TaskID, host.ErrConflict, "task is %s, not running", t.Status)
	}
	attempt, runner, what := -1, "", ""
	claimed := f.Claimed != nil && f.Claimed.TaskID == t.TaskID
	switch {
	case f.Record != nil:
		attempt, runner, what = f.Record.Attempt, f.Record.RunnerID, "attempt "+f.AttemptID
	case f.recordedAttempt != nil:
		attempt, what = *f.recordedAttempt, "attempt "+f.AttemptID
	case claimed:
		attempt, what = f.Claimed.AttemptCount, "the claim"
	}
	if runner == "" && claimed {
		runner = f.Claimed.RunnerID
	}
	if attempt >= 0 && attempt != t.AttemptCount {
		return host.Errorf("finish", t.TaskID, host.ErrConflict, "%s is attempt %d but the task is on attempt %d (a stale runner?)", what, attempt, t.AttemptCount)
	}
	if leases && runner != "" && runner != t.RunnerID {
		return host.Errorf("finish", t.TaskID, host.ErrConflict, "runner %s does not hold the task: runner %s claimed attempt %d since (its lease was reclaimed)", runner, t.RunnerID, t.AttemptCount)
	}
	return nil
}

// refuseSettle records the refused caller's attempt, if it brought one,
// claims hold leases and its claim was taken from it (see displaced),
// with EventTaskSettleRefused; the task is left as it is.
func refuseSettle(ctx context.Context, tx SettleTx, t *host.TaskRecord, f *Finish) error {
	if f.Record == nil || !tx.Leases() {
		return nil
	}
	if ok, err := displaced(ctx, tx, t, f.Record); !ok || err != nil {
		return err
	}
	if err := tx.RecordAttempt(ctx, f.Prepared); err != nil {
		return err
	}
	return tx.Event(EventTaskSettleRefused, t.TaskID, f.AttemptID, map[string]any{
		"attempt": f.Record.Attempt, "runner_id": f.Record.RunnerID,
		"holder_attempt": t.AttemptCount, "holder_runner_id": t.RunnerID, "status": t.Status})
}

// displaced reports whether a's claim of t was taken from it: the task was
// claimed again since (a later attempt, or another runner), or its lease
// was reclaimed (the task moved on with no attempt of that number
// recorded). A settle repeated after its own claim was settled (an
// attempt of that number is recorded) is not: it records nothing.
func displaced(ctx context.Context, tx SettleTx, t *host.TaskRecord, a *host.Attempt) (bool, error) {
	if a.Attempt < t.AttemptCount || a.RunnerID != "" && a.RunnerID != t.RunnerID {
		return true, nil
	}
	if t.Status == host.TaskRunning || a.Attempt != t.AttemptCount {
		return false, nil
	}
	var settled int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM attempt_records WHERE task_id = $1 AND attempt = $2`, t.TaskID, a.Attempt).Scan(&settled)
	return settled == 0, err
}

// settle settles the running task t held by the caller: its attempt's
// events and record, the new status, follow-ups and outbox if it
// completed, and the task_attempt_finished and task_finished (or
// task_retry_scheduled) events.
func settle(ctx context.Context, tx SettleTx, op string, t *host.TaskRecord, f *Finish, startedAt string) (*host.TaskRecord, error) {
	ms, rc, errMsg := f.ms, f.rc, f.Error
	now := tx.Now()
	if f.AttemptID != "" {
		if len(f.Bundle) > 0 && f.Record != nil {
			if err := tx.Event(host.EventBundleCompiled, t.TaskID, f.AttemptID, f.Bundle); err != nil {
				return nil, err
			}
		}
		// task_started is written with the settlement rather than when
		// the node starts: a claimed task then costs no extra durable
		// commit, and a node that never started has none. The event's
		// own time is when it was appended; data.started_at is when the
		// node started.
		if err := AppendEventData(tx, host.EventTaskStarted, t.TaskID, f.AttemptID, (&EventData{}).
			Int("attempt", int64(t.AttemptCount)).Str("runner_id", t.RunnerID).Str("started_at", startedAt)); err != nil {
			return nil, err
		}
		if f.Record != nil {
			if err := tx.RecordAttempt(ctx, f.Prepared); err != nil {
				return nil, err
			}
		}
	}
	var missing []string
	switch {
	case t.CancelRequested || ms == host.MachineCanceled:
	case f.refused != "":
		ms, rc = host.MachineFailed, host.RetryPermanent
		errMsg = strings.TrimPrefix(errMsg+"; "+f.refused, "; ")
	case ms != host.MachineOK:
	case f.AttemptID == "":
		missing = []string{"recorded attempt"}
	default:
		var err error
		if missing, err = missingEvidence(ctx, tx, t, f); err != nil {
			return nil, err
		}
	}
	status, lastErr := SettleStatus(t, ms, rc, errMsg, missing)
	outcome := f.Outcome
	outcome.Status, outcome.MachineStatus = status, ms
	outJSON, err := json.Marshal(outcome)
	if err != nil {
		return nil, err
	}
	avail := t.AvailableAt
	var backoff time.Duration
	var finished any
	if status == host.TaskRetryableFailure {
		backoff = tx.Backoff(t.AttemptCount)
		avail = now.Add(backoff)
	} else {
		finished = host.FormatTime(now)
	}
	// The task's UPDATE and, for a completed attempt, its artifacts
	// verified and its outbox: statements whose outcome settling does
	// not read, sent together.
	stmts := []Stmt{{settleUpdate[tx.Leases()], []any{string(status), string(outJSON), lastErr, host.FormatTime(avail), finished, host.FormatTime(now), t.TaskID}}}
	if status == host.TaskCompleted {
		stmts = completedStmts(stmts, t, f, now)
	}
	if err := tx.ExecAll(ctx, stmts); err != nil {
		return nil, err
	}
	applied, wf := []string{}, ""
	if status == host.TaskCompleted {
		if applied, wf, err = applyCompleted(ctx, tx, op, t, f, now); err != nil {
			return nil, err
		}
	}
	if err := finishEvents(tx, t, f, ms, rc, status, missing, applied, wf, avail, backoff); err != nil {
		return nil, err
	}
	// The record as the UPDATE left it, without reading it back.
	t.Status, t.Outcome, t.LastError = status, &outcome, lastErr
	t.AvailableAt, t.UpdatedAt = Stored(avail), Stored(now)
	if finished != nil {
		fin := Stored(now)
		t.FinishedAt = &fin
	}
	return t, nil
}

// settleUpdate is the settlement's UPDATE, by SettleTx.Leases.
var settleUpdate = map[bool]string{
	false: `UPDATE tasks SET status = $1, outcome = $2, last_error = $3, available_at = $4, finished_at = $5, updated_at = $6 WHERE task_id = $7`,
	true: `UPDATE tasks SET status = $1, outcome = $2, last_error = $3, available_at = $4, finished_at = $5, updated_at = $6,
		lease_expires_at = NULL WHERE task_id = $7`,
}

// completedStmts adds to stmts what a completed attempt's settlement
// writes without reading: its artifacts verified and its outbox messages.
func completedStmts(stmts []Stmt, t *host.TaskRecord, f *Finish, now time.Time) []Stmt {
	if f.AttemptID != "" {
		stmts = append(stmts, Stmt{`UPDATE artifacts SET verified_at = $1 WHERE attempt_id = $2 AND verified_at IS NULL`, []any{host.FormatTime(now), f.AttemptID}})
	}
	for _, m := range f.Outcome.ExternalMessage {
		stmts = append(stmts, Stmt{`INSERT INTO outbox_messages (message_id, task_id, attempt_id, tenant, message, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
			[]any{host.NewID("msg"), t.TaskID, f.AttemptID, t.Tenant, string(evidence.CompactJSON(m)), host.OutboxPending, host.FormatTime(now)}})
	}
	return stmts
}

// applyCompleted applies the rest of what a completed attempt leaves
// behind (completedStmts wrote its artifacts and outbox): its follow-ups
// (returned) and what it staged (SettleTx.ApplyStaged, what the signal
// did returned).
func applyCompleted(ctx context.Context, tx SettleTx, op string, t *host.TaskRecord, f *Finish, now time.Time) ([]string, string, error) {
	applied := []string{}
	for i := range f.followUps {
		ft, err := NewTask(op, &f.followUps[i], 0, now)
		if err != nil {
			return nil, "", err
		}
		ft.ParentTaskID, ft.Tenant = t.TaskID, t.Tenant
		if err := InsertTask(ctx, tx, ft, f.AttemptID); err != nil {
			return nil, "", err
		}
		applied = append(applied, ft.TaskID)
	}
	in := f.FinishInput
	wf, err := tx.ApplyStaged(ctx, t, &in, now)
	return applied, wf, err
}

// finishEvents appends task_attempt_finished and task_finished (or
// task_retry_scheduled).
func finishEvents(tx SettleTx, t *host.TaskRecord, f *Finish, ms host.MachineStatus, rc host.RetryClass, status host.TaskStatus,
	missing, applied []string, wf string, avail time.Time, backoff time.Duration) error {
	d := (&EventData{}).Int("attempt", int64(t.AttemptCount))
	if n := len(f.Outcome.ExternalMessage); n > 0 {
		d.Int("external_messages", int64(n))
	}
	if len(f.followUps) > 0 {
		d.Value("follow_ups", f.followUps)
	}
	d.Value("follow_ups_applied", applied)
	if f.refused != "" {
		d.Str("follow_ups_refused", f.refused)
	}
	d.Int("follow_ups_staged", int64(len(f.FollowUps))).Str("machine_status", string(ms))
	if len(missing) > 0 {
		d.Value("missing_evidence", missing)
	}
	d.Str("retry_class", string(rc)).Str("status", string(status))
	if wf != "" {
		d.Str("workflow", wf)
	}
	if f.Outcome.WorkflowSignal != "" {
		d.Str("workflow_signal", f.Outcome.WorkflowSignal)
	}
	if err := AppendEventData(tx, host.EventTaskAttemptFinished, t.TaskID, f.AttemptID, d); err != nil {
		return err
	}
	if status == host.TaskRetryableFailure {
		return AppendEventData(tx, host.EventTaskRetryScheduled, t.TaskID, f.AttemptID, (&EventData{}).
			Int("attempt", int64(t.AttemptCount)).Str("available_at", host.FormatTime(avail)).Int("backoff_ms", backoff.Milliseconds()).Int("max_attempts", int64(t.MaxAttempts)))
	}
	return AppendEventData(tx, host.EventTaskFinished, t.TaskID, f.AttemptID, (&EventData{}).
		Int("attempt_count", int64(t.AttemptCount)).Str("status", string(status)))
}

// missingEvidence lists what the task's evidence requirements and the
// outcome's artifact_paths ask for that the attempt did not store.
func missingEvidence(ctx context.Context, tx SettleTx, t *host.TaskRecord, f *Finish) ([]string, error) {
	if !WantsArtifacts(t, &f.Outcome) {
		return nil, nil // nothing to look for
	}
	rows, err := tx.Query(ctx, `SELECT relative_path, role FROM artifacts WHERE attempt_id = $1`, f.AttemptID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	names, roles := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var name, role string
		if err := rows.Scan(&name, &role); err != nil {
			return nil, err
		}
		names[name], roles[role] = true, true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return MissingEvidence(t, &f.Outcome, names, roles), nil
}

// InsertTask stores a new task and appends task_enqueued (attemptID: the
// attempt that staged it, for a follow-up).
func InsertTask(ctx context.Context, tx Tx, t *host.TaskRecord, attemptID string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO tasks (task_id, task_type, source, subject, description, priority, payload, requested_profile_id,
		requested_adapter_id, requested_model, skill_ids, workflow_ref, evidence_requirements, status, max_attempts, attempt_count,
		available_at, created_at, updated_at, last_error, parent_task_id, runner_id, cancel_requested, tenant)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 0, $16, $17, $18, '', $19, '', $20, $21)`,
		t.TaskID, t.TaskType, t.Source, t.Subject, t.Description, t.Priority, string(t.Payload), t.RequestedProfileID,
		t.RequestedAdapterID, t.RequestedModel, JSONOrEmpty(t.SkillIDs, len(t.SkillIDs) == 0), JSONOrEmpty(t.WorkflowRef, t.WorkflowRef == nil),
		JSONOrEmpty(t.EvidenceRequirements, t.EvidenceRequirements == nil), string(t.Status), t.MaxAttempts,
		host.FormatTime(t.AvailableAt), host.FormatTime(t.CreatedAt), host.FormatTime(t.UpdatedAt), t.ParentTaskID, false, t.Tenant); err != nil {
		return err
	}
	d := &EventData{}
	if t.ParentTaskID != "" {
		d.Str("attempt_id", attemptID)
	}
	d.Str("available_at", host.FormatTime(t.AvailableAt)).Int("max_attempts", int64(t.MaxAttempts))
	if t.ParentTaskID != "" {
		d.Str("parent_task_id", t.ParentTaskID)
	}
	d.Int("priority", int64(t.Priority)).Str("source", t.Source).Str("task_type", t.TaskType)
	return AppendEventData(tx, host.EventTaskEnqueued, t.TaskID, attemptID, d)
}

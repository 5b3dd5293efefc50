package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

const taskColumns = `task_id, task_type, source, subject, description, priority, payload, requested_profile_id, requested_adapter_id,
	requested_model, skill_ids, workflow_ref, evidence_requirements, status, max_attempts, attempt_count, available_at, created_at,
	updated_at, started_at, finished_at, outcome, last_error, parent_task_id, runner_id, cancel_requested, tenant, resume_values`

func scanTask(row interface{ Scan(...any) error }) (*host.TaskRecord, error) {
	var t host.TaskRecord
	var payload, skills, wf, evreq, status, avail, created, updated, resume string
	var started, finished, outcome sql.NullString
	if err := row.Scan(&t.TaskID, &t.TaskType, &t.Source, &t.Subject, &t.Description, &t.Priority, &payload, &t.RequestedProfileID,
		&t.RequestedAdapterID, &t.RequestedModel, &skills, &wf, &evreq, &status, &t.MaxAttempts, &t.AttemptCount, &avail, &created,
		&updated, &started, &finished, &outcome, &t.LastError, &t.ParentTaskID, &t.RunnerID, &t.CancelRequested, &t.Tenant, &resume); err != nil {
		return nil, err
	}
	t.Payload = json.RawMessage(payload)
	t.Status = host.TaskStatus(status)
	t.AvailableAt, t.CreatedAt, t.UpdatedAt = parseTS(avail), parseTS(created), parseTS(updated)
	t.StartedAt, t.FinishedAt = parseNullTS(started), parseNullTS(finished)
	if err := storecore.DecodeTaskJSON(&t, skills, wf, evreq, outcome.String, resume); err != nil {
		return nil, err
	}
	return &t, nil
}

// insertTask stores a new task and appends task_enqueued.
func (s *Store) insertTask(tx *wtx, t *host.TaskRecord, attemptID string) error {
	_, err := tx.Exec(`INSERT OR FAIL INTO tasks (task_id, task_type, source, subject, description, priority, payload, requested_profile_id,
		requested_adapter_id, requested_model, skill_ids, workflow_ref, evidence_requirements, status, max_attempts, attempt_count,
		available_at, created_at, updated_at, last_error, parent_task_id, runner_id, cancel_requested, tenant)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, '', ?, '', 0, ?)`,
		t.TaskID, t.TaskType, t.Source, t.Subject, t.Description, t.Priority, string(t.Payload), t.RequestedProfileID,
		t.RequestedAdapterID, t.RequestedModel, storecore.JSONOrEmpty(t.SkillIDs, len(t.SkillIDs) == 0), storecore.JSONOrEmpty(t.WorkflowRef, t.WorkflowRef == nil),
		storecore.JSONOrEmpty(t.EvidenceRequirements, t.EvidenceRequirements == nil), string(t.Status), t.MaxAttempts,
		ts(t.AvailableAt), ts(t.CreatedAt), ts(t.UpdatedAt), t.ParentTaskID, t.Tenant)
	if err != nil {
		return err
	}
	d := &evData{}
	if t.ParentTaskID != "" {
		d.str("attempt_id", attemptID)
	}
	d.str("available_at", ts(t.AvailableAt)).int("max_attempts", int64(t.MaxAttempts))
	if t.ParentTaskID != "" {
		d.str("parent_task_id", t.ParentTaskID)
	}
	d.int("priority", int64(t.Priority)).str("source", t.Source).str("task_type", t.TaskType)
	_, err = s.eventData(tx, host.EventTaskEnqueued, t.TaskID, attemptID, d)
	return err
}

// Enqueue implements host.Queue.
func (s *Store) Enqueue(ctx context.Context, intent host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
	const op = "enqueue"
	t, err := storecore.NewTask(op, &intent, opts.MaxAttempts, s.now())
	if err != nil {
		return nil, err
	}
	t.Tenant = host.DefaultTenant
	if opts.Tenant != "" {
		if err := host.CheckTenant(op, opts.Tenant); err != nil {
			return nil, err
		}
		t.Tenant = opts.Tenant
	}
	au := host.AuditFor(ctx, host.AuditTask)
	err = s.w.do(ctx, func(tx *wtx) error {
		if t.WorkflowRef != nil {
			if err := storecore.CheckWorkflowRef(ctx, coreTx{s, tx}, op, t.Tenant, t.WorkflowRef); err != nil {
				return err
			}
		}
		if err := s.insertTask(tx, t, ""); err != nil {
			return err
		}
		if au != nil {
			_, err := s.event(tx, au.Type, t.TaskID, "", au.Data)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, host.Wrap(op, intent.TaskType, err)
	}
	if au != nil {
		au.MarkWritten()
	}
	return t, nil
}

func (s *Store) loadTask(q queryer, ctx context.Context, op, id string) (*host.TaskRecord, error) {
	t, err := scanTask(q.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE task_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf(op, id, host.ErrNotFound, "")
	}
	return t, err
}

// reloadTask is loadTask for a task whose record the caller holds: only
// the columns queue operations change are read, onto a copy of it.
func (s *Store) reloadTask(tx *wtx, op string, held *host.TaskRecord) (*host.TaskRecord, error) {
	t := *held
	var status, avail, updated string
	var started, finished, outcome sql.NullString
	err := tx.QueryRow(`SELECT status, attempt_count, available_at, updated_at, started_at, finished_at, outcome, last_error, runner_id, cancel_requested
		FROM tasks WHERE task_id = ?`, held.TaskID).Scan(&status, &t.AttemptCount, &avail, &updated, &started, &finished, &outcome, &t.LastError, &t.RunnerID, &t.CancelRequested)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf(op, held.TaskID, host.ErrNotFound, "")
	}
	if err != nil {
		return nil, err
	}
	t.Status = host.TaskStatus(status)
	t.AvailableAt, t.UpdatedAt = parseTS(avail), parseTS(updated)
	t.StartedAt, t.FinishedAt = parseNullTS(started), parseNullTS(finished)
	t.Outcome = nil
	if outcome.String != "" {
		if err := json.Unmarshal([]byte(outcome.String), &t.Outcome); err != nil {
			return nil, fmt.Errorf("task %s: %w", t.TaskID, err)
		}
	}
	return &t, nil
}

// txq adapts a write transaction to queryer without letting a caller's context reach
// the writer's connection (see writer.do).
type txq struct{ tx *wtx }

func (q txq) QueryRowContext(_ context.Context, query string, args ...any) *sql.Row {
	return q.tx.QueryRow(query, args...)
}

// Task implements host.Queue.
func (s *Store) Task(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	t, err := scanTask(s.queryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE task_id = ?`, taskID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, host.Errorf("get task", taskID, host.ErrNotFound, "")
	}
	return t, host.Wrap("get task", taskID, err)
}

// ListTasks implements host.Queue.
func (s *Store) ListTasks(ctx context.Context, f host.TaskFilter) ([]*host.TaskRecord, error) {
	const op = "list tasks"
	q := `SELECT ` + taskColumns + ` FROM tasks WHERE 1`
	var args []any
	if f.Status != "" {
		if !f.Status.Valid() {
			return nil, host.Invalid(op, "status", "unknown status %q", f.Status)
		}
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	if f.TaskType != "" {
		q += ` AND task_type = ?`
		args = append(args, f.TaskType)
	}
	if f.Tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, f.Tenant)
	}
	if f.After != "" {
		q += fmt.Sprintf(storecore.TasksAfter, "?")
		args = append(args, f.After)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.db.QueryContext(ctx, q+` ORDER BY seq DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer rows.Close()
	var out []*host.TaskRecord
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, host.Wrap(op, "", err)
		}
		out = append(out, t)
	}
	return out, host.Wrap(op, "", rows.Err())
}

// Claim implements host.Queue; a zero now means the store's clock. The
// choice and the update are one UPDATE
// statement inside the writer's BEGIN IMMEDIATE transaction, so two
// processes can never both move the same task to running.
func (s *Store) Claim(ctx context.Context, runnerID string, now time.Time) (*host.TaskRecord, error) {
	const op = "claim"
	if err := host.CheckID(op, "runner_id", runnerID); err != nil {
		return nil, err
	}
	if now.IsZero() {
		now = s.now()
	}
	var t *host.TaskRecord
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		t, err = scanTask(tx.WriteRow(`UPDATE OR FAIL tasks SET status = 'running', attempt_count = attempt_count + 1,
			started_at = ?1, updated_at = ?1, runner_id = ?2
			WHERE seq = (SELECT seq FROM tasks INDEXED BY tasks_ready WHERE status IN ('pending', 'retryable_failure') AND available_at <= ?1
				ORDER BY priority, available_at, seq LIMIT 1)
			RETURNING `+taskColumns, ts(now), runnerID))
		if errors.Is(err, sql.ErrNoRows) {
			return host.Errorf(op, "", host.ErrEmpty, "")
		}
		if err != nil {
			return err
		}
		_, err = s.eventData(tx, host.EventTaskClaimed, t.TaskID, "", (&evData{}).
			int("attempt", int64(t.AttemptCount)).int("max_attempts", int64(t.MaxAttempts)).str("runner_id", runnerID))
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return t, nil
}

// Finish implements host.Queue.
func (s *Store) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	const op = "finish"
	if err := host.CheckID(op, "task_id", taskID); err != nil {
		return nil, err
	}
	var row *attemptRow
	if a := in.Record; a != nil {
		var err error
		if row, err = s.prepareAttempt(a); err != nil {
			return nil, err
		}
		if a.TaskID != taskID {
			return nil, host.Invalid(op, "record.task_id", "is %q, not the task being finished", a.TaskID)
		}
		in.AttemptID = a.AttemptID
	}
	if in.AttemptID != "" {
		if err := host.CheckID(op, "attempt_id", in.AttemptID); err != nil {
			return nil, err
		}
	}
	ms := in.Outcome.MachineStatus
	switch ms {
	case host.MachineOK, host.MachineNeedsRetry, host.MachineBlocked, host.MachineFailed, host.MachineCanceled:
	default:
		return nil, host.Invalid(op, "outcome.machine_status", "must be ok, needs_retry, blocked, failed or canceled")
	}
	rc := in.RetryClass
	if rc == "" {
		rc = host.RetryNone
	}
	if rc != host.RetryNone && rc != host.RetryRetryable && rc != host.RetryPermanent {
		return nil, host.Invalid(op, "retry_class", "must be none, retryable or permanent")
	}
	// Follow-ups are attributed to their parent whatever source the skill
	// claimed. Staging them is the guest's doing, so a problem with them
	// fails the task instead of refusing to settle it.
	followUps, refused := storecore.StageFollowUps(taskID, in.FollowUps)
	if in.FollowUpsRefused != "" {
		followUps, refused = nil, in.FollowUpsRefused
	}
	if err := storecore.CheckExternalMessages(op, in.Outcome.ExternalMessage); err != nil {
		return nil, err
	}

	var out *host.TaskRecord
	err := s.w.do(ctx, func(tx *wtx) error {
		// The writer may run this again: start from the caller's values.
		ms, rc, errMsg := ms, rc, in.Error
		now := s.now()
		var t *host.TaskRecord
		var err error
		if in.Claimed != nil && in.Claimed.TaskID == taskID {
			t, err = s.reloadTask(tx, op, in.Claimed)
		} else {
			t, err = s.loadTask(txq{tx}, ctx, op, taskID)
		}
		if err != nil {
			return err
		}
		if t.Status != host.TaskRunning {
			return host.Errorf(op, taskID, host.ErrConflict, "task is %s, not running", t.Status)
		}
		if a := in.Record; a != nil {
			if a.Attempt != t.AttemptCount {
				return host.Errorf(op, taskID, host.ErrConflict, "attempt %s is attempt %d but the task is on attempt %d (a stale runner?)", a.AttemptID, a.Attempt, t.AttemptCount)
			}
			if len(in.Bundle) > 0 {
				if _, err := s.event(tx, host.EventBundleCompiled, taskID, a.AttemptID, in.Bundle); err != nil {
					return err
				}
			}
			if err := s.taskStarted(tx, t, a.AttemptID, ts(a.StartedAt)); err != nil {
				return err
			}
			if err := s.recordAttempt(tx, row); err != nil {
				return err
			}
		} else if in.AttemptID != "" {
			var attTask, attStarted string
			var attNum int
			err = tx.QueryRow(`SELECT task_id, attempt, started_at FROM attempt_records WHERE attempt_id = ?`, in.AttemptID).Scan(&attTask, &attNum, &attStarted)
			if errors.Is(err, sql.ErrNoRows) {
				return host.Invalid(op, "attempt_id", "no attempt %s is recorded; record the attempt before finishing the task", in.AttemptID)
			}
			if err != nil {
				return err
			}
			if attTask != taskID {
				return host.Invalid(op, "attempt_id", "attempt %s was not recorded for task %s", in.AttemptID, taskID)
			}
			if attNum != t.AttemptCount {
				return host.Errorf(op, taskID, host.ErrConflict, "attempt %s is attempt %d but the task is on attempt %d (a stale runner?)", in.AttemptID, attNum, t.AttemptCount)
			}
			if err := s.taskStarted(tx, t, in.AttemptID, attStarted); err != nil {
				return err
			}
		}

		canceled := t.CancelRequested || ms == host.MachineCanceled
		var missing []string
		switch {
		case canceled:
		case refused != "":
			ms, rc = host.MachineFailed, host.RetryPermanent
			errMsg = strings.TrimPrefix(errMsg+"; "+refused, "; ")
		case ms != host.MachineOK:
		case in.AttemptID == "":
			missing = []string{"recorded attempt"}
		default:
			if missing, err = missingEvidence(tx, t, in); err != nil {
				return err
			}
		}
		status, lastErr := storecore.SettleStatus(t, ms, rc, errMsg, missing)
		outcome := in.Outcome
		outcome.Status, outcome.MachineStatus = status, ms
		outJSON, err := json.Marshal(outcome)
		if err != nil {
			return err
		}

		avail := t.AvailableAt
		var backoff time.Duration
		var finished any
		if status == host.TaskRetryableFailure {
			backoff = s.opts.Backoff(t.AttemptCount)
			avail = now.Add(backoff)
		} else {
			finished = ts(now)
		}
		if _, err := tx.Exec(`UPDATE OR FAIL tasks SET status = ?, outcome = ?, last_error = ?, available_at = ?, finished_at = ?, updated_at = ? WHERE task_id = ?`,
			string(status), string(outJSON), lastErr, ts(avail), finished, ts(now), taskID); err != nil {
			return err
		}

		applied, wfResult := []string{}, ""
		if status == host.TaskCompleted {
			for i := range followUps {
				ft, err := storecore.NewTask(op, &followUps[i], 0, now)
				if err != nil {
					return err
				}
				ft.ParentTaskID, ft.Tenant = taskID, t.Tenant
				if err := s.insertTask(tx, ft, in.AttemptID); err != nil {
					return err
				}
				applied = append(applied, ft.TaskID)
			}
			if _, err := tx.Exec(`UPDATE OR FAIL artifacts SET verified_at = ? WHERE attempt_id = ? AND verified_at IS NULL`, ts(now), in.AttemptID); err != nil {
				return err
			}
			if err := queueMessages(tx, t, in.AttemptID, in.Outcome.ExternalMessage, now); err != nil {
				return err
			}
			opts := host.SensorEventOptions{Tenant: t.Tenant, Origin: "task:" + taskID}
			if _, err := storecore.ApplyReported(bg, coreTx{s, tx}, in.SensorEvents, opts, taskID, in.AttemptID, now); err != nil {
				return err
			}
			if err := s.applyPublished(tx, in.Messages, t.Tenant, taskID, in.AttemptID, now); err != nil {
				return err
			}
			if t.WorkflowRef != nil && in.Outcome.WorkflowSignal != "" {
				if wfResult, err = storecore.ApplyWorkflowSignal(bg, coreTx{s, tx}, s.opts.Quotas, t, in.Outcome.WorkflowSignal, in.AttemptID, now); err != nil {
					return err
				}
			}
		}
		d := (&evData{}).int("attempt", int64(t.AttemptCount))
		if n := len(in.Outcome.ExternalMessage); n > 0 {
			d.int("external_messages", int64(n))
		}
		if len(followUps) > 0 {
			d.value("follow_ups", followUps)
		}
		d.value("follow_ups_applied", applied)
		if refused != "" {
			d.str("follow_ups_refused", refused)
		}
		d.int("follow_ups_staged", int64(len(in.FollowUps))).str("machine_status", string(ms))
		if len(missing) > 0 {
			d.value("missing_evidence", missing)
		}
		d.str("retry_class", string(rc)).str("status", string(status))
		if wfResult != "" {
			d.str("workflow", wfResult)
		}
		if in.Outcome.WorkflowSignal != "" {
			d.str("workflow_signal", in.Outcome.WorkflowSignal)
		}
		if _, err := s.eventData(tx, host.EventTaskAttemptFinished, taskID, in.AttemptID, d); err != nil {
			return err
		}
		if status == host.TaskRetryableFailure {
			_, err = s.eventData(tx, host.EventTaskRetryScheduled, taskID, in.AttemptID, (&evData{}).
				int("attempt", int64(t.AttemptCount)).str("available_at", ts(avail)).int("backoff_ms", backoff.Milliseconds()).int("max_attempts", int64(t.MaxAttempts)))
		} else {
			_, err = s.eventData(tx, host.EventTaskFinished, taskID, in.AttemptID, (&evData{}).
				int("attempt_count", int64(t.AttemptCount)).str("status", string(status)))
		}
		if err != nil {
			return err
		}
		// The record as the UPDATE left it, without reading it back.
		t.Status, t.Outcome, t.LastError = status, &outcome, lastErr
		t.AvailableAt, t.UpdatedAt = storecore.Stored(avail), storecore.Stored(now)
		if finished != nil {
			f := storecore.Stored(now)
			t.FinishedAt = &f
		}
		out = t
		return nil
	})
	if errors.Is(err, errAttemptExists) {
		// Recorded before (a retried call): settle with the recorded one
		// if it is the same attempt.
		if err := s.sameAttempt(ctx, in.Record); err != nil {
			return nil, host.Wrap(op, taskID, err)
		}
		in.Record = nil
		return s.Finish(ctx, taskID, in)
	}
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	if row != nil {
		s.values.Stored(row.values)
	}
	return out, nil
}

// taskStarted appends task_started for the attempt that settles t. It is
// written with the settlement rather than when the node starts: a claimed
// task then costs no extra durable commit, and a node that never started
// (no route, pack refused) has no task_started. The event's own time is
// when it was appended; data.started_at is when the node started.
func (s *Store) taskStarted(tx *wtx, t *host.TaskRecord, attemptID, startedAt string) error {
	_, err := s.eventData(tx, host.EventTaskStarted, t.TaskID, attemptID, (&evData{}).
		int("attempt", int64(t.AttemptCount)).str("runner_id", t.RunnerID).str("started_at", startedAt))
	return err
}

// missingEvidence lists what the task's evidence requirements and the
// outcome's artifact_paths ask for that the attempt did not store.
func missingEvidence(tx *wtx, t *host.TaskRecord, in host.FinishInput) ([]string, error) {
	if !storecore.WantsArtifacts(t, &in.Outcome) {
		return nil, nil // nothing to look for
	}
	rows, err := tx.Query(`SELECT relative_path, role FROM artifacts WHERE attempt_id = ?`, in.AttemptID)
	if err != nil {
		return nil, err
	}
	names, roles := map[string]bool{}, map[string]bool{}
	for rows.Next() {
		var name, role string
		if err := rows.Scan(&name, &role); err != nil {
			rows.Close()
			return nil, err
		}
		names[name], roles[role] = true, true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return storecore.MissingEvidence(t, &in.Outcome, names, roles), nil
}

// ReclaimRunning implements host.Queue.
func (s *Store) ReclaimRunning(ctx context.Context, now time.Time) (int, error) {
	const op = "reclaim running tasks"
	if now.IsZero() {
		now = s.now()
	}
	n := 0
	err := s.w.do(ctx, func(tx *wtx) error {
		n = 0
		rows, err := tx.Query(`SELECT ` + taskColumns + ` FROM tasks WHERE status = 'running' ORDER BY seq`)
		if err != nil {
			return err
		}
		var running []*host.TaskRecord
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				rows.Close()
				return err
			}
			running = append(running, t)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, t := range running {
			status := host.TaskRetryableFailure
			msg := fmt.Sprintf("attempt %d was interrupted: runner %s stopped before finishing it", t.AttemptCount, t.RunnerID)
			switch {
			case t.CancelRequested:
				status, msg = host.TaskOperatorCanceled, "canceled by the operator"
			case t.AttemptCount >= t.MaxAttempts:
				status = host.TaskPermanentFailure
				msg += fmt.Sprintf("; no attempts left (%d of %d)", t.AttemptCount, t.MaxAttempts)
			}
			var finished any
			avail := ts(now)
			if status != host.TaskRetryableFailure {
				finished, avail = ts(now), ts(t.AvailableAt)
			}
			if _, err := tx.Exec(`UPDATE tasks SET status = ?, last_error = ?, available_at = ?, finished_at = ?, updated_at = ? WHERE task_id = ?`,
				string(status), msg, avail, finished, ts(now), t.TaskID); err != nil {
				return err
			}
			if _, err := s.event(tx, host.EventBootSweepReclaimed, t.TaskID, "", map[string]any{
				"runner_id": t.RunnerID, "attempt": t.AttemptCount, "status": status}); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, host.Wrap(op, "", err)
	}
	return n, nil
}

// CountTasks implements host.Queue: one pass over the status index.
func (s *Store) CountTasks(ctx context.Context) (map[host.TaskStatus]int, error) {
	const op = "count tasks"
	rows, err := s.query(ctx, `SELECT status, count(*) FROM tasks INDEXED BY tasks_status GROUP BY status`)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer rows.Close()
	out := map[host.TaskStatus]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, host.Wrap(op, "", err)
		}
		out[host.TaskStatus(st)] = n
	}
	return out, host.Wrap(op, "", rows.Err())
}

// TenantUsage implements host.UsageCounter.
func (s *Store) TenantUsage(ctx context.Context) (map[string]host.TenantUsage, error) {
	const op = "count tenant usage"
	rows, err := s.query(ctx, storecore.TenantUsageQuery)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer rows.Close()
	out, err := storecore.ScanUsage(rows)
	return out, host.Wrap(op, "", err)
}

var _ host.TenantCounter = (*Store)(nil)

// TenantCounts implements host.TenantCounter.
func (s *Store) TenantCounts(ctx context.Context, tenant string) (*host.TenantCounts, error) {
	const op = "count tenant rows"
	rows, err := s.query(ctx, storecore.TenantCountsQuery("?1"), storecore.TenantOr(tenant))
	if err != nil {
		return nil, host.Wrap(op, tenant, err)
	}
	defer rows.Close()
	out, err := storecore.ScanTenantCounts(rows)
	return out, host.Wrap(op, tenant, err)
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
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

// insertTask stores a new task and appends task_enqueued
// (storecore.InsertTask).
func (s *Store) insertTask(tx *wtx, t *host.TaskRecord, attemptID string) error {
	return storecore.InsertTask(bg, coreTx{s, tx}, t, attemptID)
}

// Enqueue implements host.Queue (storecore.Queue.Enqueue).
func (s *Store) Enqueue(ctx context.Context, intent host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
	return s.queue().Enqueue(ctx, intent, opts)
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
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
		_, err = s.eventData(tx, host.EventTaskClaimed, t.TaskID, "", (&storecore.EventData{}).
			Int("attempt", int64(t.AttemptCount)).Int("max_attempts", int64(t.MaxAttempts)).Str("runner_id", runnerID))
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	return t, nil
}

// Finish implements host.Queue (storecore.Queue.Finish).
func (s *Store) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	return s.queue().Finish(ctx, taskID, in)
}

// Cancel implements host.Queue (storecore.Queue.Cancel).
func (s *Store) Cancel(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	return s.queue().Cancel(ctx, taskID)
}

// ReclaimRunning implements host.Queue: every running task is settled by
// storecore.ReclaimTask.
func (s *Store) ReclaimRunning(ctx context.Context, now time.Time) (int, error) {
	const op = "reclaim running tasks"
	if now.IsZero() {
		now = s.now()
	}
	n := 0
	err := s.w.do(ctx, func(tx *wtx) error {
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
		n = len(running)
		for _, t := range running {
			if err := storecore.ReclaimTask(bg, coreTx{s, tx}, t, now, "boot_sweep", ""); err != nil {
				return err
			}
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
	out, err := storecore.ScanTaskCounts(rows)
	return out, host.Wrap(op, "", err)
}

var _ host.TenantCounter = (*Store)(nil)

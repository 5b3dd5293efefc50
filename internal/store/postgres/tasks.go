package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// ErrNotSupported is returned, before anything is changed, by an
// operation that needs a part of host.Backend this store does not
// implement yet.
var ErrNotSupported = errors.New("not supported by the PostgreSQL store yet")

const taskColumns = `task_id, task_type, source, subject, description, priority, payload, requested_profile_id, requested_adapter_id,
	requested_model, skill_ids, workflow_ref, evidence_requirements, status, max_attempts, attempt_count, available_at, created_at,
	updated_at, started_at, finished_at, outcome, last_error, parent_task_id, runner_id, cancel_requested, tenant, resume_values`

func scanTask(row pgx.Row) (*host.TaskRecord, error) {
	var t host.TaskRecord
	var payload, skills, wf, evreq, status, avail, created, updated, resume string
	var started, finished, outcome *string
	if err := row.Scan(&t.TaskID, &t.TaskType, &t.Source, &t.Subject, &t.Description, &t.Priority, &payload, &t.RequestedProfileID,
		&t.RequestedAdapterID, &t.RequestedModel, &skills, &wf, &evreq, &status, &t.MaxAttempts, &t.AttemptCount, &avail, &created,
		&updated, &started, &finished, &outcome, &t.LastError, &t.ParentTaskID, &t.RunnerID, &t.CancelRequested, &t.Tenant, &resume); err != nil {
		return nil, err
	}
	t.Payload = json.RawMessage(payload)
	t.Status = host.TaskStatus(status)
	t.AvailableAt, t.CreatedAt, t.UpdatedAt = parseTS(avail), parseTS(created), parseTS(updated)
	t.StartedAt, t.FinishedAt = parseNullTS(started), parseNullTS(finished)
	out := ""
	if outcome != nil {
		out = *outcome
	}
	return &t, storecore.DecodeTaskJSON(&t, skills, wf, evreq, out, resume)
}

// insertTask stores a new task and queues task_enqueued
// (storecore.InsertTask).
func (x *tx) insertTask(ctx context.Context, t *host.TaskRecord, attemptID string) error {
	return storecore.InsertTask(ctx, coreTx{x}, t, attemptID)
}

// Enqueue implements host.Queue (storecore.Queue.Enqueue).
func (s *Store) Enqueue(ctx context.Context, intent host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
	return s.queue().Enqueue(ctx, intent, opts)
}

// loadTask reads one task; forUpdate locks its row until the transaction
// ends.
func loadTask(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, op, id string, forUpdate bool) (*host.TaskRecord, error) {
	lock := ""
	if forUpdate {
		lock = ` FOR UPDATE`
	}
	t, err := scanTask(q.QueryRow(ctx, `SELECT `+taskColumns+` FROM tasks WHERE task_id = $1`+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, host.Errorf(op, id, host.ErrNotFound, "")
	}
	return t, err
}

// Task implements host.Queue.
func (s *Store) Task(ctx context.Context, taskID string) (*host.TaskRecord, error) {
	t, err := loadTask(ctx, s.pool, "get task", taskID, false)
	return t, host.Wrap("get task", taskID, err)
}

// ListTasks implements host.Queue.
func (s *Store) ListTasks(ctx context.Context, f host.TaskFilter) ([]*host.TaskRecord, error) {
	const op = "list tasks"
	var a args
	q := `SELECT ` + taskColumns + ` FROM tasks WHERE true`
	if f.Status != "" {
		if !f.Status.Valid() {
			return nil, host.Invalid(op, "status", "unknown status %q", f.Status)
		}
		q += ` AND status = ` + a.Add(string(f.Status))
	}
	if f.TaskType != "" {
		q += ` AND task_type = ` + a.Add(f.TaskType)
	}
	if f.Tenant != "" {
		q += ` AND tenant = ` + a.Add(f.Tenant)
	}
	if f.After != "" {
		q += fmt.Sprintf(storecore.TasksAfter, a.Add(f.After))
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, q+` ORDER BY seq DESC LIMIT `+strconv.Itoa(limit), a...)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.TaskRecord, error) { return scanTask(r) })
	return out, host.Wrap(op, "", err)
}

// CountTasks implements host.Queue.
func (s *Store) CountTasks(ctx context.Context) (map[host.TaskStatus]int, error) {
	const op = "count tasks"
	rows, err := s.pool.Query(ctx, `SELECT status, count(*) FROM tasks GROUP BY status`)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer rows.Close()
	out, err := storecore.ScanTaskCounts(rows)
	return out, host.Wrap(op, "", err)
}

var _ host.TenantCounter = (*Store)(nil)

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
)

// EventTaskSettleRefused is appended when Finish refuses to settle a task
// because the caller's claim was taken from it (its lease was reclaimed,
// the task claimed again): data.attempt and data.runner_id name the
// caller's claim, data.holder_attempt, data.holder_runner_id and
// data.status the task's. The caller's attempt, if it brought one, is
// recorded just before it: what a paused node did stays evidence.
const EventTaskSettleRefused = "task_settle_refused"

// finishInput is a FinishInput checked: what a settlement needs besides
// the task.
type finishInput struct {
	host.FinishInput
	taskID    string
	row       *attemptRow
	ms        host.MachineStatus
	rc        host.RetryClass
	followUps []host.TaskIntent
	refused   string
	// recordedAttempt is the number of the attempt AttemptID names, read
	// in the transaction (without a Record).
	recordedAttempt *int
}

// checkFinish checks what Finish is given, as internal/store/sqlite does.
func (s *Store) checkFinish(op, taskID string, in host.FinishInput) (*finishInput, error) {
	if err := host.CheckID(op, "task_id", taskID); err != nil {
		return nil, err
	}
	f := &finishInput{FinishInput: in, taskID: taskID, ms: in.Outcome.MachineStatus, rc: in.RetryClass}
	if a := in.Record; a != nil {
		var err error
		if f.row, err = s.prepareAttempt(a); err != nil {
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
	f.followUps, f.refused = storecore.StageFollowUps(taskID, in.FollowUps)
	if in.FollowUpsRefused != "" {
		f.followUps, f.refused = nil, in.FollowUpsRefused
	}
	if err := storecore.CheckExternalMessages(op, in.Outcome.ExternalMessage); err != nil {
		return nil, err
	}
	return f, nil
}

// Finish implements host.Queue, fenced: the task must still be running
// on the caller's claim, i.e. its attempt_count is the caller's attempt
// number (Record.Attempt, the recorded AttemptID's, or Claimed's) and its
// runner_id the caller's runner (Record.RunnerID or Claimed.RunnerID,
// when given). Otherwise the settlement is refused with ErrConflict and
// nothing about the task changes; but if the caller's claim was taken
// from it (its lease reclaimed, the task claimed again: see displaced),
// unlike on internal/store/sqlite, the attempt it brought in Record is
// recorded anyway, followed by EventTaskSettleRefused: a node paused past
// its lease cannot settle the task another node has since taken, and what
// it did is still evidence.
// Settling, recording the attempt, applying the follow-ups and the outbox
// are one transaction.
func (s *Store) Finish(ctx context.Context, taskID string, in host.FinishInput) (*host.TaskRecord, error) {
	const op = "finish"
	f, err := s.checkFinish(op, taskID, in)
	if err != nil {
		return nil, err
	}
	var out *host.TaskRecord
	var fenced error
	err = s.write(ctx, func(x *tx) error {
		fenced = nil
		t, err := loadTask(ctx, x, op, taskID, true)
		if err != nil {
			return err
		}
		startedAt, err := x.finishingAttempt(ctx, op, t, f)
		if err != nil {
			return err
		}
		if fenced = x.fence(t, f); fenced != nil {
			return x.refuseSettle(ctx, t, f)
		}
		out, err = x.settle(ctx, op, t, f, startedAt)
		return err
	})
	if errors.Is(err, errAttemptExists) {
		// Recorded before (a retried call): settle with the recorded
		// one if it is the same attempt.
		if err := s.sameAttempt(ctx, in.Record); err != nil {
			return nil, host.Wrap(op, taskID, err)
		}
		in.Record = nil
		in.AttemptID = f.AttemptID
		return s.Finish(ctx, taskID, in)
	}
	if err == nil {
		err = fenced
	}
	if err != nil {
		return nil, host.Wrap(op, taskID, err)
	}
	if f.row != nil {
		s.values.Stored(f.row.values)
	}
	return out, nil
}

// finishingAttempt checks the attempt named by AttemptID (without a
// Record): recorded, for this task. It returns its started_at (the
// Record's, for a Record) and sets f's attempt number for the fence.
func (x *tx) finishingAttempt(ctx context.Context, op string, t *host.TaskRecord, f *finishInput) (string, error) {
	if a := f.Record; a != nil {
		return ts(a.StartedAt), nil
	}
	if f.AttemptID == "" {
		return "", nil
	}
	var attTask, attStarted string
	var attNum int
	err := x.QueryRow(ctx, `SELECT task_id, attempt, started_at FROM attempt_records WHERE attempt_id = $1`, f.AttemptID).Scan(&attTask, &attNum, &attStarted)
	if errors.Is(err, pgx.ErrNoRows) {
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

// fence reports why the caller may not settle t, or nil if it may.
func (x *tx) fence(t *host.TaskRecord, f *finishInput) error {
	if t.Status != host.TaskRunning {
		return host.Errorf("finish", t.TaskID, host.ErrConflict, "task is %s, not running", t.Status)
	}
	attempt, runner, what := -1, "", ""
	switch {
	case f.Record != nil:
		attempt, runner, what = f.Record.Attempt, f.Record.RunnerID, "attempt "+f.AttemptID
	case f.recordedAttempt != nil:
		attempt, what = *f.recordedAttempt, "attempt "+f.AttemptID
	case f.Claimed != nil && f.Claimed.TaskID == t.TaskID:
		attempt, what = f.Claimed.AttemptCount, "the claim"
	}
	if runner == "" && f.Claimed != nil && f.Claimed.TaskID == t.TaskID {
		runner = f.Claimed.RunnerID
	}
	if attempt >= 0 && attempt != t.AttemptCount {
		return host.Errorf("finish", t.TaskID, host.ErrConflict, "%s is attempt %d but the task is on attempt %d (a stale runner?)", what, attempt, t.AttemptCount)
	}
	if runner != "" && runner != t.RunnerID {
		return host.Errorf("finish", t.TaskID, host.ErrConflict, "runner %s does not hold the task: runner %s claimed attempt %d since (its lease was reclaimed)", runner, t.RunnerID, t.AttemptCount)
	}
	return nil
}

// refuseSettle records the refused caller's attempt, if it brought one
// and its claim was taken from it (see displaced), with
// EventTaskSettleRefused; the task is left as it is.
func (x *tx) refuseSettle(ctx context.Context, t *host.TaskRecord, f *finishInput) error {
	if f.row == nil {
		return nil
	}
	if ok, err := x.displaced(ctx, t, f.Record); !ok || err != nil {
		return err
	}
	x.attempt(f.row)
	_, err := x.event(EventTaskSettleRefused, t.TaskID, f.AttemptID, map[string]any{
		"attempt": f.Record.Attempt, "runner_id": f.Record.RunnerID,
		"holder_attempt": t.AttemptCount, "holder_runner_id": t.RunnerID, "status": t.Status})
	return err
}

// displaced reports whether a's claim of t was taken from it: the task was
// claimed again since (a later attempt, or another runner), or its lease
// was reclaimed (the task moved on with no attempt of that number
// recorded). A settle repeated after its own claim was settled (an
// attempt of that number is recorded) is not: it records nothing, as on
// internal/store/sqlite.
func (x *tx) displaced(ctx context.Context, t *host.TaskRecord, a *host.Attempt) (bool, error) {
	if a.Attempt < t.AttemptCount || a.RunnerID != "" && a.RunnerID != t.RunnerID {
		return true, nil
	}
	if t.Status == host.TaskRunning || a.Attempt != t.AttemptCount {
		return false, nil
	}
	var settled bool
	err := x.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM attempt_records WHERE task_id = $1 AND attempt = $2)`, t.TaskID, a.Attempt).Scan(&settled)
	return !settled, err
}

// settle settles the running task t held by the caller: its attempt's
// events and record, the new status, follow-ups and outbox if it
// completed, and the task_attempt_finished and task_finished (or
// task_retry_scheduled) events.
func (x *tx) settle(ctx context.Context, op string, t *host.TaskRecord, f *finishInput, startedAt string) (*host.TaskRecord, error) {
	ms, rc, errMsg := f.ms, f.rc, f.Error
	now := x.s.now()
	if f.AttemptID != "" {
		if len(f.Bundle) > 0 && f.Record != nil {
			if _, err := x.event(host.EventBundleCompiled, t.TaskID, f.AttemptID, f.Bundle); err != nil {
				return nil, err
			}
		}
		if _, err := x.event(host.EventTaskStarted, t.TaskID, f.AttemptID, map[string]any{
			"attempt": t.AttemptCount, "runner_id": t.RunnerID, "started_at": startedAt}); err != nil {
			return nil, err
		}
		if f.row != nil {
			x.attempt(f.row)
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
		if missing, err = x.missingEvidence(ctx, t, f); err != nil {
			return nil, err
		}
	}
	status, lastErr := storecore.SettleStatus(t, ms, rc, errMsg, missing)
	outcome := f.Outcome
	outcome.Status, outcome.MachineStatus = status, ms
	outJSON, err := json.Marshal(outcome)
	if err != nil {
		return nil, err
	}
	avail := t.AvailableAt
	var backoff time.Duration
	var finished *string
	if status == host.TaskRetryableFailure {
		backoff = x.s.opts.Backoff(t.AttemptCount)
		avail = now.Add(backoff)
	} else {
		fin := ts(now)
		finished = &fin
	}
	if _, err := x.Exec(ctx, `UPDATE tasks SET status = $1, outcome = $2, last_error = $3, available_at = $4, finished_at = $5, updated_at = $6,
		lease_expires_at = NULL WHERE task_id = $7`, string(status), string(outJSON), lastErr, ts(avail), finished, ts(now), t.TaskID); err != nil {
		return nil, err
	}
	applied, wf := []string{}, ""
	if status == host.TaskCompleted {
		if applied, wf, err = x.applyCompleted(ctx, op, t, f, now); err != nil {
			return nil, err
		}
	}
	if err := x.finishEvents(t, f, ms, rc, status, missing, applied, wf, avail, backoff); err != nil {
		return nil, err
	}
	// The record as the UPDATE left it, without reading it back.
	t.Status, t.Outcome, t.LastError = status, &outcome, lastErr
	t.AvailableAt, t.UpdatedAt = parseTS(ts(avail)), parseTS(ts(now))
	if finished != nil {
		fin := parseTS(*finished)
		t.FinishedAt = &fin
	}
	return t, nil
}

// applyCompleted applies what a completed attempt leaves behind: its
// follow-ups (returned), its artifacts verified, its outbox messages, its
// sensor events, published messages and workflow signal (what the signal
// did returned, see applyStaged).
func (x *tx) applyCompleted(ctx context.Context, op string, t *host.TaskRecord, f *finishInput, now time.Time) ([]string, string, error) {
	applied := []string{}
	for i := range f.followUps {
		ft, err := storecore.NewTask(op, &f.followUps[i], 0, now)
		if err != nil {
			return nil, "", err
		}
		ft.ParentTaskID, ft.Tenant = t.TaskID, t.Tenant
		if err := x.insertTask(ctx, ft, f.AttemptID); err != nil {
			return nil, "", err
		}
		applied = append(applied, ft.TaskID)
	}
	if f.AttemptID != "" {
		if _, err := x.Exec(ctx, `UPDATE artifacts SET verified_at = $1 WHERE attempt_id = $2 AND verified_at IS NULL`, ts(now), f.AttemptID); err != nil {
			return nil, "", err
		}
	}
	if err := x.queueMessages(ctx, t, f.AttemptID, f.Outcome.ExternalMessage, now); err != nil {
		return nil, "", err
	}
	wf, err := x.applyStaged(ctx, t, &f.FinishInput, now)
	return applied, wf, err
}

// finishEvents queues task_attempt_finished and task_finished (or
// task_retry_scheduled), with internal/store/sqlite's data.
func (x *tx) finishEvents(t *host.TaskRecord, f *finishInput, ms host.MachineStatus, rc host.RetryClass, status host.TaskStatus,
	missing, applied []string, wf string, avail time.Time, backoff time.Duration) error {
	d := map[string]any{"attempt": t.AttemptCount, "follow_ups_applied": applied, "follow_ups_staged": len(f.FollowUps),
		"machine_status": ms, "retry_class": rc, "status": status}
	if n := len(f.Outcome.ExternalMessage); n > 0 {
		d["external_messages"] = n
	}
	if len(f.followUps) > 0 {
		d["follow_ups"] = f.followUps
	}
	if f.refused != "" {
		d["follow_ups_refused"] = f.refused
	}
	if len(missing) > 0 {
		d["missing_evidence"] = missing
	}
	if wf != "" {
		d["workflow"] = wf
	}
	if f.Outcome.WorkflowSignal != "" {
		d["workflow_signal"] = f.Outcome.WorkflowSignal
	}
	if _, err := x.event(host.EventTaskAttemptFinished, t.TaskID, f.AttemptID, d); err != nil {
		return err
	}
	var err error
	if status == host.TaskRetryableFailure {
		_, err = x.event(host.EventTaskRetryScheduled, t.TaskID, f.AttemptID, map[string]any{
			"attempt": t.AttemptCount, "available_at": ts(avail), "backoff_ms": backoff.Milliseconds(), "max_attempts": t.MaxAttempts})
	} else {
		_, err = x.event(host.EventTaskFinished, t.TaskID, f.AttemptID, map[string]any{"attempt_count": t.AttemptCount, "status": status})
	}
	return err
}

// missingEvidence lists what the task's evidence requirements and the
// outcome's artifact_paths ask for that the attempt did not store.
func (x *tx) missingEvidence(ctx context.Context, t *host.TaskRecord, f *finishInput) ([]string, error) {
	if !storecore.WantsArtifacts(t, &f.Outcome) {
		return nil, nil
	}
	rows, err := x.Query(ctx, `SELECT relative_path, role FROM artifacts WHERE attempt_id = $1`, f.AttemptID)
	if err != nil {
		return nil, err
	}
	names, roles := map[string]bool{}, map[string]bool{}
	var name, role string
	if _, err := pgx.ForEachRow(rows, []any{&name, &role}, func() error {
		names[name], roles[role] = true, true
		return nil
	}); err != nil {
		return nil, err
	}
	return storecore.MissingEvidence(t, &f.Outcome, names, roles), nil
}

package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// The sensor rules of host.Sensors written once against Tx; what they
// do to workflow records is workflows.go's.

// SensorTx is a TaskTx that also inserts the tasks of workflow states.
type SensorTx interface {
	TaskTx
	WorkflowTx
}

// sensorPlan is what an accepted event will create, prepared (checked)
// before anything is written.
type sensorPlan struct {
	task      *host.TaskRecord
	wf        *host.WorkflowRecord
	wfCreated bool
}

// ApplySensorEvent records one validated event and applies it (see
// host.Sensors.RecordSensorEvent). attemptID, if any, is the attempt that
// reported it, named in the runtime events. Across writers: everything
// the event would create is checked first without writing (a refusal then
// leaves nothing behind); then its record claims the dedupe key (an
// insert that does nothing if an accepted record of another writer holds
// it, sensor_events_dedupe), and only the claimer creates the task and
// workflow. (Under SQLite's single writer the claim always succeeds.)
func ApplySensorEvent(ctx context.Context, tx SensorTx, ev *host.SensorEvent, tenant, origin, attemptID string, now time.Time) (*host.SensorEventRecord, error) {
	r := &host.SensorEventRecord{RecordID: host.NewID("sev"), Origin: origin, Tenant: tenant, ReceivedAt: now, Event: *ev}
	if ev.Expired(now) {
		r.Status, r.Detail = host.SensorExpired, "past its freshness_deadline "+ev.FreshnessDeadline
		return r, recordSensorEvent(ctx, tx, r, host.EventSensorEventExpired, attemptID)
	}
	dup, err := acceptedSensorEvent(ctx, tx, r, attemptID)
	if err != nil {
		return nil, err
	}
	if dup {
		return r, nil
	}
	var p sensorPlan
	if ev.ProposedWorkflow != nil {
		if p.wf, p.wfCreated, err = SensorWorkflow(ctx, tx, ev, tenant, now); err != nil {
			return nil, err
		}
	}
	if ev.ProposedTask != nil {
		if p.task, err = SensorTask(ctx, tx, ev, tenant, now); err != nil {
			return nil, err
		}
	}
	r.Status = host.SensorRecorded
	claimed, err := InsertSensorEvent(ctx, tx, r, true)
	if err != nil {
		return nil, err
	}
	if !claimed {
		// Another writer's record took the key since the check above.
		if dup, err := acceptedSensorEvent(ctx, tx, r, attemptID); err != nil || !dup {
			return nil, errors.Join(err, errors.New("sensor event: its dedupe key is held but no accepted record holds it"))
		}
		return r, nil
	}
	return r, applySensorPlan(ctx, tx, r, &p, attemptID, now)
}

// acceptedSensorEvent looks for the accepted record holding r's dedupe
// key; if there is one, r is recorded as its duplicate (dup true).
func acceptedSensorEvent(ctx context.Context, tx Tx, r *host.SensorEventRecord, attemptID string) (dup bool, err error) {
	ev := &r.Event
	err = tx.QueryRow(ctx, `SELECT record_id FROM sensor_events WHERE tenant = $1 AND sensor_id = $2 AND dedupe_key = $3 AND status IN `+AcceptedSensorStatuses,
		r.Tenant, ev.SensorID, ev.DedupeKey).Scan(&r.DuplicateOf)
	if errors.Is(err, ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.Status = host.SensorDeduped
	return true, recordSensorEvent(ctx, tx, r, host.EventSensorEventDeduped, attemptID)
}

// applySensorPlan creates what the accepted event r proposed (its record
// holding the key), sets its record's status and appends its events.
func applySensorPlan(ctx context.Context, tx SensorTx, r *host.SensorEventRecord, p *sensorPlan, attemptID string, now time.Time) error {
	if p.wf != nil {
		var err error
		if p.wf, p.wfCreated, err = ClaimWorkflow(ctx, tx, p.wf, p.wfCreated); err != nil {
			return err
		}
		r.Status, r.WorkflowID = host.SensorWorkflowDeduped, p.wf.WorkflowID
		if p.wfCreated {
			r.Status = host.SensorWorkflowCreated
		}
	}
	if p.task != nil {
		if err := tx.InsertTask(ctx, p.task); err != nil {
			return err
		}
		r.Status, r.TaskID = host.SensorTaskCreated, p.task.TaskID
	}
	if _, err := tx.Exec(ctx, `UPDATE sensor_events SET status = $1, task_id = $2, workflow_id = $3 WHERE record_id = $4`,
		string(r.Status), r.TaskID, r.WorkflowID, r.RecordID); err != nil {
		return err
	}
	if err := tx.Event(host.EventSensorEventRecorded, r.TaskID, attemptID, SensorEventData(r)); err != nil {
		return err
	}
	if p.task != nil {
		if err := tx.Event(host.EventSensorTaskCreated, p.task.TaskID, attemptID, map[string]any{
			"record_id": r.RecordID, "sensor_id": r.Event.SensorID, "task_type": p.task.TaskType}); err != nil {
			return err
		}
	}
	if p.wf != nil {
		return SensorWorkflowEvents(ctx, tx, p.wf, p.wfCreated, r, attemptID, now)
	}
	return nil
}

// recordSensorEvent stores r (not holding its key) and appends evType.
func recordSensorEvent(ctx context.Context, tx Tx, r *host.SensorEventRecord, evType, attemptID string) error {
	if _, err := InsertSensorEvent(ctx, tx, r, false); err != nil {
		return err
	}
	return tx.Event(evType, r.TaskID, attemptID, SensorEventData(r))
}

// InsertSensorEvent stores r. With claim, r holds its dedupe key: if an
// accepted record holds it already, nothing is stored (claimed false),
// after waiting for the transaction that inserted it, if any is still
// running (the unique index sensor_events_dedupe of both backends).
func InsertSensorEvent(ctx context.Context, tx Tx, r *host.SensorEventRecord, claim bool) (claimed bool, err error) {
	event, err := json.Marshal(r.Event)
	if err != nil {
		return false, err
	}
	onConflict := ""
	if claim {
		onConflict = ` ON CONFLICT (tenant, sensor_id, dedupe_key) WHERE status IN ` + AcceptedSensorStatuses + ` DO NOTHING`
	}
	e := &r.Event
	n, err := tx.Exec(ctx, `INSERT INTO sensor_events (`+SensorEventColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`+onConflict,
		r.RecordID, r.Tenant, e.SensorID, e.EventID, e.DedupeKey, string(r.Status), r.Detail, r.TaskID, r.DuplicateOf, r.Origin,
		string(event), host.FormatTime(r.ReceivedAt), r.WorkflowID)
	return n == 1, err
}

// SensorTask builds, without inserting, an accepted event's
// proposed_task; its task type must be routed (task_type_overrides,
// task_type_routes) and its workflow_ref, if any, the tenant's.
func SensorTask(ctx context.Context, tx SensorTx, ev *host.SensorEvent, tenant string, now time.Time) (*host.TaskRecord, error) {
	intent := *ev.ProposedTask
	intent.Source = host.SensorSource(ev.SensorID)
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM task_type_overrides WHERE task_type = $1 UNION ALL SELECT 1 FROM task_type_routes WHERE task_type = $1 LIMIT 1`,
		intent.TaskType).Scan(&one)
	if errors.Is(err, ErrNoRows) {
		return nil, ErrNoRoute(intent.TaskType)
	}
	if err != nil {
		return nil, err
	}
	t, err := NewTask("sensor event", &intent, 0, now)
	if err != nil {
		return nil, err
	}
	t.Tenant = tenant
	if ref := t.WorkflowRef; ref != nil {
		if err := CheckWorkflowRef(ctx, tx, "sensor event", tenant, ref); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// CheckApplyOptions checks and completes the options of
// host.Sensors.ApplySensorEvents: the tenant's, and the origin, by
// default the reporting attempt.
func CheckApplyOptions(op string, opts host.SensorEventOptions, attemptID string) (host.SensorEventOptions, error) {
	opts.Tenant = TenantOr(opts.Tenant)
	if err := host.CheckTenant(op, opts.Tenant); err != nil {
		return opts, err
	}
	if opts.Origin == "" {
		opts.Origin = "attempt:" + attemptID
	}
	return opts, nil
}

// ApplyReported applies the events an attempt reported: each as
// ApplySensorEvent does, except that one the queue refuses
// (invalid, or its proposed_task routes nowhere) is recorded as refused
// (event sensor_event_refused) rather than failing the write. A refusal
// leaves nothing else behind (ApplySensorEvent checks before it writes).
func ApplyReported(ctx context.Context, tx SensorTx, evs []host.SensorEvent, opts host.SensorEventOptions, taskID, attemptID string, now time.Time) ([]*host.SensorEventRecord, error) {
	out := make([]*host.SensorEventRecord, 0, len(evs))
	for i := range evs {
		ev := &evs[i]
		err := host.ValidateSensorEvent(ev)
		if err == nil {
			var r *host.SensorEventRecord
			if r, err = ApplySensorEvent(ctx, tx, ev, opts.Tenant, opts.Origin, attemptID, now); err == nil {
				out = append(out, r)
				continue
			}
			if !errors.Is(err, host.ErrValidation) {
				return nil, err
			}
		}
		r := &host.SensorEventRecord{RecordID: host.NewID("sev"), Status: host.SensorRefused, Detail: err.Error(),
			Origin: opts.Origin, Tenant: opts.Tenant, ReceivedAt: now, Event: *ev}
		if _, err := InsertSensorEvent(ctx, tx, r, false); err != nil {
			return nil, err
		}
		if err := tx.Event(host.EventSensorEventRefused, taskID, attemptID, map[string]any{
			"record_id": r.RecordID, "sensor_id": ev.SensorID, "detail": r.Detail}); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ListSensorEvents lists recorded sensor events, newest first (see
// host.Sensors.ListSensorEvents).
func ListSensorEvents(ctx context.Context, q Querier, f host.SensorEventFilter) ([]*host.SensorEventRecord, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := q.Query(ctx, `SELECT `+SensorEventColumns+` FROM sensor_events
		WHERE ($1 = '' OR sensor_id = $1) AND ($2 = '' OR tenant = $2) AND ($3 = '' OR origin = $3) ORDER BY seq DESC LIMIT $4`,
		f.SensorID, f.Tenant, f.Origin, limit)
	if err != nil {
		return nil, err
	}
	return CollectRows(rows, ScanSensorEvent)
}

package storecore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/packrun/packrun/host"
)

// The sensor rules of host.Sensors written once against Tx. Applying one
// accepted event (creating its task or workflow, claiming its dedupe key)
// is still each driver's (SensorTx.ApplySensorEvent): it waits for the
// workflow rules to move (see RATIONALE.md).

// SensorTx is a Tx in which a driver applies one validated sensor event
// and checks a workflow reference.
type SensorTx interface {
	Tx
	// ApplySensorEvent records one validated event and applies it (see
	// host.Sensors.RecordSensorEvent); attemptID, if any, is the attempt
	// that reported it.
	ApplySensorEvent(ctx context.Context, ev *host.SensorEvent, tenant, origin, attemptID string, now time.Time) (*host.SensorEventRecord, error)
	// CheckWorkflowRef refuses a reference to a workflow record the
	// tenant does not have.
	CheckWorkflowRef(ctx context.Context, op, tenant string, ref *host.WorkflowRef) error
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
		if err := tx.CheckWorkflowRef(ctx, "sensor event", tenant, ref); err != nil {
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
// SensorTx.ApplySensorEvent does, except that one the queue refuses
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
			if r, err = tx.ApplySensorEvent(ctx, ev, opts.Tenant, opts.Origin, attemptID, now); err == nil {
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

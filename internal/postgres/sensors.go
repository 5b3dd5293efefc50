package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/storecore"
)

// RecordSensorEvent implements host.Sensors.
func (s *Store) RecordSensorEvent(ctx context.Context, ev host.SensorEvent, opts host.SensorEventOptions) (*host.SensorEventRecord, error) {
	const op = "record sensor event"
	tenant, origin, err := storecore.CheckSensorEvent(op, &ev, opts)
	if err != nil {
		return nil, err
	}
	var out *host.SensorEventRecord
	err = s.write(ctx, func(x *tx) error {
		var err error
		out, err = x.applySensorEvent(ctx, &ev, tenant, origin, "", s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, ev.SensorID, err)
	}
	return out, nil
}

// sensorPlan is what an accepted event will create, prepared (checked)
// before anything is written.
type sensorPlan struct {
	task      *host.TaskRecord
	wf        *host.WorkflowRecord
	wfCreated bool
}

// applySensorEvent records one validated event and applies it (see
// host.Sensors.RecordSensorEvent). attemptID, if any, is the attempt that
// reported it, named in the runtime events. Across nodes: everything the
// event would create is checked first without writing (a refusal then
// leaves nothing behind); then its record claims the dedupe key (an
// insert that does nothing if an accepted record of another node holds
// it, sensor_events_dedupe), and only the claimer creates the task and
// workflow.
func (x *tx) applySensorEvent(ctx context.Context, ev *host.SensorEvent, tenant, origin, attemptID string, now time.Time) (*host.SensorEventRecord, error) {
	r := &host.SensorEventRecord{RecordID: host.NewID("sev"), Origin: origin, Tenant: tenant, ReceivedAt: now, Event: *ev}
	if ev.Expired(now) {
		r.Status, r.Detail = host.SensorExpired, "past its freshness_deadline "+ev.FreshnessDeadline
		return r, x.recordSensorEvent(ctx, r, host.EventSensorEventExpired, attemptID)
	}
	dup, err := x.acceptedSensorEvent(ctx, r, attemptID)
	if err != nil {
		return nil, err
	}
	if dup {
		return r, nil
	}
	var p sensorPlan
	if ev.ProposedWorkflow != nil {
		if p.wf, p.wfCreated, err = x.sensorWorkflow(ctx, ev, tenant, now); err != nil {
			return nil, err
		}
	}
	if ev.ProposedTask != nil {
		if p.task, err = storecore.SensorTask(ctx, coreTx{x}, ev, tenant, now); err != nil {
			return nil, err
		}
	}
	r.Status = host.SensorRecorded
	claimed, err := storecore.InsertSensorEvent(ctx, coreTx{x}, r, true)
	if err != nil {
		return nil, err
	}
	if !claimed {
		// Another node's record took the key since the check above.
		if dup, err := x.acceptedSensorEvent(ctx, r, attemptID); err != nil || !dup {
			return nil, errors.Join(err, errors.New("sensor event: its dedupe key is held but no accepted record holds it"))
		}
		return r, nil
	}
	return r, x.applySensorPlan(ctx, r, &p, attemptID, now)
}

// acceptedSensorEvent looks for the accepted record holding r's dedupe
// key; if there is one, r is recorded as its duplicate (dup true).
func (x *tx) acceptedSensorEvent(ctx context.Context, r *host.SensorEventRecord, attemptID string) (dup bool, err error) {
	ev := &r.Event
	err = x.QueryRow(ctx, `SELECT record_id FROM sensor_events WHERE tenant = $1 AND sensor_id = $2 AND dedupe_key = $3 AND status IN `+storecore.AcceptedSensorStatuses,
		r.Tenant, ev.SensorID, ev.DedupeKey).Scan(&r.DuplicateOf)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	r.Status = host.SensorDeduped
	return true, x.recordSensorEvent(ctx, r, host.EventSensorEventDeduped, attemptID)
}

// applySensorPlan creates what the accepted event r proposed (its record
// holding the key), sets its record's status and appends its events, in
// internal/sqlite's order.
func (x *tx) applySensorPlan(ctx context.Context, r *host.SensorEventRecord, p *sensorPlan, attemptID string, now time.Time) error {
	if p.wf != nil {
		var err error
		if p.wf, p.wfCreated, err = x.claimRecord(ctx, p.wf, p.wfCreated); err != nil {
			return err
		}
		r.Status, r.WorkflowID = host.SensorWorkflowDeduped, p.wf.WorkflowID
		if p.wfCreated {
			r.Status = host.SensorWorkflowCreated
		}
	}
	if p.task != nil {
		if err := x.insertTask(ctx, p.task, ""); err != nil {
			return err
		}
		r.Status, r.TaskID = host.SensorTaskCreated, p.task.TaskID
	}
	if _, err := x.Exec(ctx, `UPDATE sensor_events SET status = $1, task_id = $2, workflow_id = $3 WHERE record_id = $4`,
		string(r.Status), r.TaskID, r.WorkflowID, r.RecordID); err != nil {
		return err
	}
	if _, err := x.event(host.EventSensorEventRecorded, r.TaskID, attemptID, storecore.SensorEventData(r)); err != nil {
		return err
	}
	if p.task != nil {
		if _, err := x.event(host.EventSensorTaskCreated, p.task.TaskID, attemptID, map[string]any{
			"record_id": r.RecordID, "sensor_id": r.Event.SensorID, "task_type": p.task.TaskType}); err != nil {
			return err
		}
	}
	if p.wf != nil {
		return x.sensorWorkflowEvents(ctx, p.wf, p.wfCreated, r, attemptID, now)
	}
	return nil
}

// recordSensorEvent stores r (not holding its key) and queues evType.
func (x *tx) recordSensorEvent(ctx context.Context, r *host.SensorEventRecord, evType, attemptID string) error {
	if _, err := storecore.InsertSensorEvent(ctx, coreTx{x}, r, false); err != nil {
		return err
	}
	_, err := x.event(evType, r.TaskID, attemptID, storecore.SensorEventData(r))
	return err
}

// ApplySensorEvents implements host.Sensors.
func (s *Store) ApplySensorEvents(ctx context.Context, evs []host.SensorEvent, opts host.SensorEventOptions, attemptID string) ([]*host.SensorEventRecord, error) {
	const op = "apply sensor events"
	opts, err := storecore.CheckApplyOptions(op, opts, attemptID)
	if err != nil {
		return nil, err
	}
	var out []*host.SensorEventRecord
	err = s.write(ctx, func(x *tx) error {
		var err error
		out, err = storecore.ApplyReported(ctx, coreTx{x}, evs, opts, "", attemptID, s.now())
		return err
	})
	return out, host.Wrap(op, attemptID, err)
}

// ListSensorEvents implements host.Sensors.
func (s *Store) ListSensorEvents(ctx context.Context, f host.SensorEventFilter) ([]*host.SensorEventRecord, error) {
	const op = "list sensor events"
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+storecore.SensorEventColumns+` FROM sensor_events
		WHERE ($1 = '' OR sensor_id = $1) AND ($2 = '' OR tenant = $2) AND ($3 = '' OR origin = $3) ORDER BY seq DESC LIMIT $4`,
		f.SensorID, f.Tenant, f.Origin, limit)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*host.SensorEventRecord, error) { return storecore.ScanSensorEvent(r) })
	return out, host.Wrap(op, "", err)
}

package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

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
	err = s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = s.applySensorEvent(tx, &ev, tenant, origin, "", s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, ev.SensorID, err)
	}
	return out, nil
}

// applySensorEvent records one validated event in tx and applies it (see
// host.Sensors.RecordSensorEvent). attemptID, if any, is the attempt
// that reported it, named in the runtime events.
func (s *Store) applySensorEvent(tx *wtx, ev *host.SensorEvent, tenant, origin, attemptID string, now time.Time) (*host.SensorEventRecord, error) {
	r := &host.SensorEventRecord{RecordID: host.NewID("sev"), Origin: origin, Tenant: tenant, ReceivedAt: now, Event: *ev}
	evType := host.EventSensorEventRecorded
	var task *host.TaskRecord
	var wf *host.WorkflowRecord
	var wfCreated bool
	switch {
	case ev.Expired(now):
		r.Status, r.Detail, evType = host.SensorExpired, "past its freshness_deadline "+ev.FreshnessDeadline, host.EventSensorEventExpired
	default:
		err := tx.QueryRow(`SELECT record_id FROM sensor_events WHERE tenant = ? AND sensor_id = ? AND dedupe_key = ? AND status IN `+storecore.AcceptedSensorStatuses,
			tenant, ev.SensorID, ev.DedupeKey).Scan(&r.DuplicateOf)
		if err == nil {
			r.Status, evType = host.SensorDeduped, host.EventSensorEventDeduped
			break
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		r.Status = host.SensorRecorded
		if ev.ProposedWorkflow != nil {
			if wf, wfCreated, err = s.sensorWorkflow(tx, ev, tenant, now); err != nil {
				return nil, err
			}
			r.Status, r.WorkflowID = host.SensorWorkflowDeduped, wf.WorkflowID
			if wfCreated {
				r.Status = host.SensorWorkflowCreated
			}
		}
		if ev.ProposedTask != nil {
			if task, err = s.sensorTask(tx, ev, tenant, now); err != nil {
				return nil, err
			}
			r.Status, r.TaskID = host.SensorTaskCreated, task.TaskID
		}
	}
	if _, err := storecore.InsertSensorEvent(bg, coreTx{s, tx}, r, false); err != nil {
		return nil, err
	}
	data := storecore.SensorEventData(r)
	if _, err := s.event(tx, evType, r.TaskID, attemptID, data); err != nil {
		return nil, err
	}
	if task != nil {
		if _, err := s.event(tx, host.EventSensorTaskCreated, task.TaskID, attemptID, map[string]any{
			"record_id": r.RecordID, "sensor_id": ev.SensorID, "task_type": task.TaskType}); err != nil {
			return nil, err
		}
	}
	if wf != nil {
		if err := s.sensorWorkflowEvents(tx, wf, wfCreated, r, attemptID, now); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// sensorTask enqueues an accepted event's proposed_task in tx
// (storecore.SensorTask builds it).
func (s *Store) sensorTask(tx *wtx, ev *host.SensorEvent, tenant string, now time.Time) (*host.TaskRecord, error) {
	t, err := storecore.SensorTask(bg, coreTx{s, tx}, ev, tenant, now)
	if err != nil {
		return nil, err
	}
	return t, s.insertTask(tx, t, "")
}

// ApplySensorEvents implements host.Sensors.
func (s *Store) ApplySensorEvents(ctx context.Context, evs []host.SensorEvent, opts host.SensorEventOptions, attemptID string) ([]*host.SensorEventRecord, error) {
	const op = "apply sensor events"
	opts, err := storecore.CheckApplyOptions(op, opts, attemptID)
	if err != nil {
		return nil, err
	}
	var out []*host.SensorEventRecord
	err = s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = storecore.ApplyReported(ctx, coreTx{s, tx}, evs, opts, "", attemptID, s.now())
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
	out, err := queryAll(s, ctx, storecore.ScanSensorEvent, `SELECT `+storecore.SensorEventColumns+` FROM sensor_events
		WHERE (?1 = '' OR sensor_id = ?1) AND (?2 = '' OR tenant = ?2) AND (?3 = '' OR origin = ?3) ORDER BY seq DESC LIMIT ?4`,
		f.SensorID, f.Tenant, f.Origin, limit)
	return out, host.Wrap(op, "", err)
}

package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
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
	if err := insertSensorEvent(tx, r); err != nil {
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

// sensorTask enqueues an accepted event's proposed_task in tx; its task
// type must be routed.
func (s *Store) sensorTask(tx *wtx, ev *host.SensorEvent, tenant string, now time.Time) (*host.TaskRecord, error) {
	intent := *ev.ProposedTask
	intent.Source = host.SensorSource(ev.SensorID)
	var one int
	err := tx.QueryRow(`SELECT 1 FROM task_type_overrides WHERE task_type = ?1 UNION ALL SELECT 1 FROM task_type_routes WHERE task_type = ?1 LIMIT 1`,
		intent.TaskType).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, storecore.ErrNoRoute(intent.TaskType)
	}
	if err != nil {
		return nil, err
	}
	t, err := storecore.NewTask("sensor event", &intent, 0, now)
	if err != nil {
		return nil, err
	}
	t.Tenant = tenant
	if ref := t.WorkflowRef; ref != nil {
		if err := checkWorkflowRef(tx, "sensor event", tenant, ref); err != nil {
			return nil, err
		}
	}
	return t, s.insertTask(tx, t, "")
}

func insertSensorEvent(tx *wtx, r *host.SensorEventRecord) error {
	event, err := json.Marshal(r.Event)
	if err != nil {
		return err
	}
	e := &r.Event
	_, err = tx.Exec(`INSERT INTO sensor_events (`+storecore.SensorEventColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.RecordID, r.Tenant, e.SensorID, e.EventID, e.DedupeKey, string(r.Status), r.Detail, r.TaskID, r.DuplicateOf, r.Origin,
		string(event), ts(r.ReceivedAt), r.WorkflowID)
	return err
}

// applyReported applies the events an attempt reported, in tx: each as
// applySensorEvent does, except that one the queue refuses (invalid, or
// its proposed_task routes nowhere) is recorded as refused (event
// sensor_event_refused) rather than failing the write.
func (s *Store) applyReported(tx *wtx, evs []host.SensorEvent, opts host.SensorEventOptions, taskID, attemptID string, now time.Time) ([]*host.SensorEventRecord, error) {
	out := make([]*host.SensorEventRecord, 0, len(evs))
	for i := range evs {
		ev := &evs[i]
		err := host.ValidateSensorEvent(ev)
		if err == nil {
			var r *host.SensorEventRecord
			if r, err = s.applySensorEvent(tx, ev, opts.Tenant, opts.Origin, attemptID, now); err == nil {
				out = append(out, r)
				continue
			}
			if !errors.Is(err, host.ErrValidation) {
				return nil, err
			}
		}
		r := &host.SensorEventRecord{RecordID: host.NewID("sev"), Status: host.SensorRefused, Detail: err.Error(),
			Origin: opts.Origin, Tenant: opts.Tenant, ReceivedAt: now, Event: *ev}
		if err := insertSensorEvent(tx, r); err != nil {
			return nil, err
		}
		if _, err := s.event(tx, host.EventSensorEventRefused, taskID, attemptID, map[string]any{
			"record_id": r.RecordID, "sensor_id": ev.SensorID, "detail": r.Detail}); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ApplySensorEvents implements host.Sensors.
func (s *Store) ApplySensorEvents(ctx context.Context, evs []host.SensorEvent, opts host.SensorEventOptions, attemptID string) ([]*host.SensorEventRecord, error) {
	const op = "apply sensor events"
	opts.Tenant = storecore.TenantOr(opts.Tenant)
	if err := host.CheckTenant(op, opts.Tenant); err != nil {
		return nil, err
	}
	if opts.Origin == "" {
		opts.Origin = "attempt:" + attemptID
	}
	var out []*host.SensorEventRecord
	err := s.w.do(ctx, func(tx *wtx) error {
		var err error
		out, err = s.applyReported(tx, evs, opts, "", attemptID, s.now())
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

package storecore

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
)

// The host.Sensors, host.Schedules and tenant counts operations of a
// store, each a rule of this package run in the driver's write
// transaction (Queue.Write) or on its pool (Queue.Read): a driver's
// methods only hand them on. A driver's write transaction is a SensorTx
// as well as a SettleTx.

// RecordSensorEvent implements host.Sensors.
func (q Queue) RecordSensorEvent(ctx context.Context, ev host.SensorEvent, opts host.SensorEventOptions) (*host.SensorEventRecord, error) {
	const op = "record sensor event"
	tenant, origin, err := CheckSensorEvent(op, &ev, opts)
	if err != nil {
		return nil, err
	}
	var out *host.SensorEventRecord
	err = q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, err = ApplySensorEvent(ctx, tx.(SensorTx), &ev, tenant, origin, "", q.Now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, ev.SensorID, err)
	}
	return out, nil
}

// ApplySensorEvents implements host.Sensors.
func (q Queue) ApplySensorEvents(ctx context.Context, evs []host.SensorEvent, opts host.SensorEventOptions, attemptID string) ([]*host.SensorEventRecord, error) {
	const op = "apply sensor events"
	opts, err := CheckApplyOptions(op, opts, attemptID)
	if err != nil {
		return nil, err
	}
	var out []*host.SensorEventRecord
	err = q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, err = ApplyReported(ctx, tx.(SensorTx), evs, opts, "", attemptID, q.Now())
		return err
	})
	return out, host.Wrap(op, attemptID, err)
}

// ListSensorEvents implements host.Sensors.
func (q Queue) ListSensorEvents(ctx context.Context, f host.SensorEventFilter) ([]*host.SensorEventRecord, error) {
	out, err := ListSensorEvents(ctx, q.Read, f)
	return out, host.Wrap("list sensor events", "", err)
}

// PutSchedule implements host.Schedules' CreateSchedule (replace false)
// and PutSchedule (replace true).
func (q Queue) PutSchedule(ctx context.Context, op string, spec host.ScheduleSpec, replace bool) (*host.RecurringSchedule, error) {
	if err := CheckScheduleSpec(op, &spec); err != nil {
		return nil, err
	}
	var out *host.RecurringSchedule
	err := q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, err = PutSchedule(ctx, tx, op, &spec, replace, q.Now())
		return err
	})
	return out, host.Wrap(op, spec.Name, err)
}

// UpdateSchedule implements host.Schedules.
func (q Queue) UpdateSchedule(ctx context.Context, tenant, ref string, u host.ScheduleUpdate) (*host.RecurringSchedule, error) {
	const op = "update schedule"
	if err := CheckScheduleUpdate(op, u); err != nil {
		return nil, err
	}
	var out *host.RecurringSchedule
	err := q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, err = ChangeSchedule(ctx, tx, op, tenant, ref, u, q.Now())
		return err
	})
	return out, host.Wrap(op, ref, err)
}

// Schedule implements host.Schedules.
func (q Queue) Schedule(ctx context.Context, tenant, ref string) (*host.RecurringSchedule, error) {
	r, err := LoadSchedule(ctx, q.Read, "", "get schedule", tenant, ref)
	return r, host.Wrap("get schedule", ref, err)
}

// ListSchedules implements host.Schedules.
func (q Queue) ListSchedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	out, err := ListSchedules(ctx, q.Read, tenant)
	return out, host.Wrap("list schedules", "", err)
}

// DeleteSchedule implements host.Schedules.
func (q Queue) DeleteSchedule(ctx context.Context, tenant, ref string) error {
	const op = "delete schedule"
	err := q.Write(ctx, func(tx SettleTx) error {
		return DeleteSchedule(ctx, tx, op, tenant, ref)
	})
	return host.Wrap(op, ref, err)
}

// NextScheduleRun implements host.Schedules.
func (q Queue) NextScheduleRun(ctx context.Context, d *Dialect) (time.Time, bool, error) {
	next, ok, err := NextScheduleRun(ctx, q.Read, d)
	return next, ok, host.Wrap("next schedule run", "", err)
}

// FireDueSchedules implements host.Schedules; a zero now is the store's
// clock.
func (q Queue) FireDueSchedules(ctx context.Context, quotas host.StoreQuotas, now time.Time) ([]*host.TaskRecord, error) {
	if now.IsZero() {
		now = q.Now()
	}
	now = now.UTC()
	var out []*host.TaskRecord
	err := q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, err = FireDueSchedules(ctx, tx, quotas, now)
		return err
	})
	if err != nil {
		return nil, host.Wrap("fire schedules", "", err)
	}
	return out, nil
}

// TenantUsage implements host.UsageCounter.
func (q Queue) TenantUsage(ctx context.Context) (map[string]host.TenantUsage, error) {
	const op = "count tenant usage"
	rows, err := q.Read.Query(ctx, TenantUsageQuery)
	if err != nil {
		return nil, host.Wrap(op, "", err)
	}
	defer rows.Close()
	out, err := ScanUsage(rows)
	return out, host.Wrap(op, "", err)
}

// TenantCounts implements host.TenantCounter.
func (q Queue) TenantCounts(ctx context.Context, tenant string) (*host.TenantCounts, error) {
	const op = "count tenant rows"
	rows, err := q.Read.Query(ctx, TenantCountsQuery("$1"), TenantOr(tenant))
	if err != nil {
		return nil, host.Wrap(op, tenant, err)
	}
	defer rows.Close()
	out, err := ScanTenantCounts(rows)
	return out, host.Wrap(op, tenant, err)
}

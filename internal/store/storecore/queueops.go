package storecore

import (
	"context"
	"time"

	"github.com/packrun/packrun/host"
)

// Ops are the host.Sensors, host.Schedules, host.Locker, host.Anchoring
// and tenant counts methods of a store, which a driver's Store embeds:
// each runs a rule of this package in the driver's write transaction
// (Queue.Write) or on its pool (Queue.Read). The Queue and Anchoring are
// built on each call, so what they close over of the driver is current.
// A driver's write transaction is a SensorTx and a LockTx as well as a
// SettleTx.
type Ops struct {
	queue     func() Queue
	dialect   *Dialect
	quotas    host.StoreQuotas
	anchoring func() Anchoring
}

// NewOps are the Ops of a driver's store.
func NewOps(queue func() Queue, d *Dialect, quotas host.StoreQuotas, anchoring func() Anchoring) Ops {
	return Ops{queue: queue, dialect: d, quotas: quotas, anchoring: anchoring}
}

// AnchorState implements host.Anchoring (Anchoring).
func (o Ops) AnchorState(ctx context.Context) (*host.AnchorState, error) {
	return o.anchoring().AnchorState(ctx)
}

// Reanchor implements host.Anchoring (Anchoring).
func (o Ops) Reanchor(ctx context.Context, e host.Event) (*host.Event, error) {
	return o.anchoring().Reanchor(ctx, e)
}

// CreateSchedule implements host.Schedules.
func (o Ops) CreateSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return o.saveSchedule(ctx, "create schedule", spec, false)
}

// PutSchedule implements host.Schedules.
func (o Ops) PutSchedule(ctx context.Context, spec host.ScheduleSpec) (*host.RecurringSchedule, error) {
	return o.saveSchedule(ctx, "put schedule", spec, true)
}

// RecordSensorEvent implements host.Sensors.
func (o Ops) RecordSensorEvent(ctx context.Context, ev host.SensorEvent, opts host.SensorEventOptions) (*host.SensorEventRecord, error) {
	q := o.queue()
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
func (o Ops) ApplySensorEvents(ctx context.Context, evs []host.SensorEvent, opts host.SensorEventOptions, attemptID string) ([]*host.SensorEventRecord, error) {
	q := o.queue()
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
func (o Ops) ListSensorEvents(ctx context.Context, f host.SensorEventFilter) ([]*host.SensorEventRecord, error) {
	q := o.queue()
	out, err := ListSensorEvents(ctx, q.Read, f)
	return out, host.Wrap("list sensor events", "", err)
}

func (o Ops) saveSchedule(ctx context.Context, op string, spec host.ScheduleSpec, replace bool) (*host.RecurringSchedule, error) {
	q := o.queue()
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
func (o Ops) UpdateSchedule(ctx context.Context, tenant, ref string, u host.ScheduleUpdate) (*host.RecurringSchedule, error) {
	q := o.queue()
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
func (o Ops) Schedule(ctx context.Context, tenant, ref string) (*host.RecurringSchedule, error) {
	q := o.queue()
	r, err := LoadSchedule(ctx, q.Read, "", "get schedule", tenant, ref)
	return r, host.Wrap("get schedule", ref, err)
}

// ListSchedules implements host.Schedules.
func (o Ops) ListSchedules(ctx context.Context, tenant string) ([]*host.RecurringSchedule, error) {
	q := o.queue()
	out, err := ListSchedules(ctx, q.Read, tenant)
	return out, host.Wrap("list schedules", "", err)
}

// DeleteSchedule implements host.Schedules.
func (o Ops) DeleteSchedule(ctx context.Context, tenant, ref string) error {
	q := o.queue()
	const op = "delete schedule"
	err := q.Write(ctx, func(tx SettleTx) error {
		return DeleteSchedule(ctx, tx, op, tenant, ref)
	})
	return host.Wrap(op, ref, err)
}

// NextScheduleRun implements host.Schedules.
func (o Ops) NextScheduleRun(ctx context.Context) (time.Time, bool, error) {
	next, ok, err := NextScheduleRun(ctx, o.queue().Read, o.dialect)
	return next, ok, host.Wrap("next schedule run", "", err)
}

// FireDueSchedules implements host.Schedules; a zero now is the store's
// clock.
func (o Ops) FireDueSchedules(ctx context.Context, now time.Time) ([]*host.TaskRecord, error) {
	q := o.queue()
	if now.IsZero() {
		now = q.Now()
	}
	now = now.UTC()
	var out []*host.TaskRecord
	err := q.Write(ctx, func(tx SettleTx) error {
		var err error
		out, err = FireDueSchedules(ctx, tx, o.quotas, now)
		return err
	})
	if err != nil {
		return nil, host.Wrap("fire schedules", "", err)
	}
	return out, nil
}

// TenantUsage implements host.UsageCounter.
func (o Ops) TenantUsage(ctx context.Context) (map[string]host.TenantUsage, error) {
	q := o.queue()
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
func (o Ops) TenantCounts(ctx context.Context, tenant string) (*host.TenantCounts, error) {
	q := o.queue()
	const op = "count tenant rows"
	rows, err := q.Read.Query(ctx, TenantCountsQuery("$1"), TenantOr(tenant))
	if err != nil {
		return nil, host.Wrap(op, tenant, err)
	}
	defer rows.Close()
	out, err := ScanTenantCounts(rows)
	return out, host.Wrap(op, tenant, err)
}

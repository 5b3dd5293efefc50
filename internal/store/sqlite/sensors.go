package sqlite

import (
	"context"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/store/storecore"
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
		out, err = storecore.ApplySensorEvent(ctx, coreTx{s, tx}, &ev, tenant, origin, "", s.now())
		return err
	})
	if err != nil {
		return nil, host.Wrap(op, ev.SensorID, err)
	}
	return out, nil
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
	out, err := storecore.ListSensorEvents(ctx, coreDB{s}, f)
	return out, host.Wrap("list sensor events", "", err)
}

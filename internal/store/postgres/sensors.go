package postgres

import (
	"context"

	"github.com/packrun/packrun/host"
)

// RecordSensorEvent implements host.Sensors (storecore.Queue).
func (s *Store) RecordSensorEvent(ctx context.Context, ev host.SensorEvent, opts host.SensorEventOptions) (*host.SensorEventRecord, error) {
	return s.queue().RecordSensorEvent(ctx, ev, opts)
}

// ApplySensorEvents implements host.Sensors (storecore.Queue).
func (s *Store) ApplySensorEvents(ctx context.Context, evs []host.SensorEvent, opts host.SensorEventOptions, attemptID string) ([]*host.SensorEventRecord, error) {
	return s.queue().ApplySensorEvents(ctx, evs, opts, attemptID)
}

// ListSensorEvents implements host.Sensors (storecore.Queue).
func (s *Store) ListSensorEvents(ctx context.Context, f host.SensorEventFilter) ([]*host.SensorEventRecord, error) {
	return s.queue().ListSensorEvents(ctx, f)
}

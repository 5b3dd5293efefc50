package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
)

// Sensor is an installed sensor node, with the schedule that runs it.
type Sensor struct {
	// SensorID is the node's typeId, the sensor_id of its events.
	SensorID    string `json:"sensor_id"`
	Pack        string `json:"pack"` // name@version
	Description string `json:"description,omitempty"`
	// Cadence is the manifest's; "" when the sensor runs only when asked.
	Cadence string `json:"cadence,omitempty"`
	// TaskType is the task type routed to it (host.SensorTaskType).
	TaskType string `json:"task_type"`
	// Enabled: its schedule exists and is not paused.
	Enabled  bool                    `json:"enabled"`
	Schedule *host.RecurringSchedule `json:"schedule,omitempty"`
}

// sensorRoutes are the routes of a manifest's sensor nodes: each gets the
// task type host.SensorTaskType(typeId), so a scheduled run is a normal
// task with the node's limits, evidence and replay.
func sensorRoutes(name string, m *packs.Manifest) []host.TaskTypeRoute {
	var routes []host.TaskTypeRoute
	for _, n := range m.Nodes {
		if n.Kind == packs.KindSensor {
			routes = append(routes, host.TaskTypeRoute{TaskTypeSpec: host.TaskTypeSpec{TaskType: host.SensorTaskType(n.TypeID)}, Pack: name, Node: n.TypeID})
		}
	}
	return routes
}

// installedSensors lists the sensor nodes of every installed pack's
// newest version, by pack name.
func (h *Host) installedSensors(ctx context.Context) ([]Sensor, error) {
	all, err := h.index.List(ctx)
	if err != nil {
		return nil, err
	}
	var out []Sensor
	seen := map[string]bool{}
	for _, p := range all {
		if seen[p.Rec.Name] {
			continue // an older version
		}
		seen[p.Rec.Name] = true
		for _, n := range p.Manifest.Nodes {
			if n.Kind == packs.KindSensor {
				out = append(out, Sensor{SensorID: n.TypeID, Pack: p.Rec.Ref(), Description: n.Description, Cadence: n.Cadence,
					TaskType: host.SensorTaskType(n.TypeID)})
			}
		}
	}
	return out, nil
}

// syncSensorSchedules keeps one recurring schedule (of the default
// tenant) per installed sensor node with a cadence, named
// host.SensorScheduleName(typeId): a new one is created, a changed cadence
// updated (a paused schedule stays paused), and the schedule of a sensor
// no longer installed, or without a cadence now, deleted.
func (h *Host) syncSensorSchedules(ctx context.Context) error {
	sensors, err := h.installedSensors(ctx)
	if err != nil {
		return err
	}
	want := map[string]bool{}
	for _, s := range sensors {
		if s.Cadence == "" {
			continue
		}
		secs, err := host.ParseEvery(s.Cadence)
		if err != nil {
			return fmt.Errorf("sensor %s: cadence: %w", s.SensorID, err)
		}
		name := host.SensorScheduleName(s.SensorID)
		want[name] = true
		_, err = h.store.PutSchedule(ctx, host.ScheduleSpec{Name: name, IntervalSeconds: secs,
			Task: host.TaskIntent{TaskType: s.TaskType, Payload: json.RawMessage(`{}`)}})
		if err != nil {
			return fmt.Errorf("schedule of sensor %s: %w", s.SensorID, err)
		}
	}
	all, err := h.store.ListSchedules(ctx, host.DefaultTenant)
	if err != nil {
		return err
	}
	for _, s := range all {
		if strings.HasPrefix(s.Name, "sensor:") && s.Task.TaskType == s.Name && !want[s.Name] {
			if err := h.store.DeleteSchedule(ctx, host.DefaultTenant, s.ScheduleID); err != nil && !errors.Is(err, host.ErrNotFound) {
				return err
			}
		}
	}
	if d := h.started.Load(); d != nil {
		d.SchedulesChanged()
	}
	return nil
}

// Sensors lists the installed sensor nodes with their schedules.
func (h *Host) Sensors(ctx context.Context) ([]Sensor, error) {
	sensors, err := h.installedSensors(ctx)
	if err != nil {
		return nil, err
	}
	for i := range sensors {
		s := &sensors[i]
		if s.Cadence == "" {
			continue
		}
		sched, err := h.store.Schedule(ctx, host.DefaultTenant, host.SensorScheduleName(s.SensorID))
		if err != nil && !errors.Is(err, host.ErrNotFound) {
			return nil, err
		}
		s.Schedule, s.Enabled = sched, sched != nil && sched.Enabled
	}
	return sensors, nil
}

// SensorRun is one run of a sensor outside its schedule.
type SensorRun struct {
	Invocation *Invocation
	// Events are the records of the events it reported.
	Events []*host.SensorEventRecord
}

// RunSensor runs the installed sensor node sensorID once, now, as a direct
// invocation (input {}), and applies the events it reported when it
// completes (see dispatch InvokeArchive).
func (h *Host) RunSensor(ctx context.Context, sensorID string) (*SensorRun, error) {
	sensors, err := h.installedSensors(ctx)
	if err != nil {
		return nil, err
	}
	for _, s := range sensors {
		if s.SensorID != sensorID {
			continue
		}
		inv, err := h.InvokePack(ctx, s.Pack, InvokeRequest{Node: s.SensorID})
		if err != nil {
			return nil, err
		}
		run := &SensorRun{Invocation: inv}
		run.Events, err = h.store.ListSensorEvents(ctx, host.SensorEventFilter{Origin: "attempt:" + inv.Attempt.AttemptID, Limit: host.MaxSensorEvents})
		return run, err
	}
	return nil, fmt.Errorf("%w: no installed sensor %q (packrun sensors list shows them)", ErrNotFound, sensorID)
}

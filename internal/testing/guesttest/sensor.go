package guesttest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/testing/hosttest"
)

// The SensorEvents (the agent runtime schema §5) the SDK test modules emit: SensorEvent
// names no sensor_id (it defaults to SensorNode), InvalidEvent lacks the
// fields the schema requires.
const (
	SensorEvent = `{"event_id":"ev-1","observed_at":"2026-01-02T15:04:05Z","source_ref":"probe:1",` +
		`"dedupe_key":"k1","payload":{"n":1}}`
	InvalidEvent = `{"event_id":"ev-2","payload":{}}`
)

// SensorNode is the typeId sensor_emit's sensor_id defaults to: the fake
// does not know which node the runtime invokes, so it serves every module
// as this node.
const SensorNode = "test.sensor"

// sensorEmit serves sensor_emit as internal/dispatch serves it to a node
// SensorNode granted sensors: host.DecodeSensorEvent decodes and checks the
// event (sensor_id defaults to SensorNode and may not name another node);
// an invalid event is a validation error, one over the size limit a
// capability breach (no response either way), as past host.MaxSensorEvents
// events; an accepted event is staged and answered
// {"event_id","status":"staged","staged":n}. (The dispatcher also refuses a
// proposed_task whose task type nothing serves; the test events propose
// none.)
func (s *Services) sensorEmit(req []byte) (abi.Status, []byte) {
	ev, err := host.DecodeSensorEvent(req, SensorNode)
	switch {
	case errors.Is(err, host.ErrTooLarge):
		return abi.StatusCapabilityBreach, nil
	case err != nil, ev.SensorID != SensorNode:
		return abi.StatusValidation, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.events) >= host.MaxSensorEvents {
		return abi.StatusCapabilityBreach, nil
	}
	s.events = append(s.events, ev)
	b, _ := json.Marshal(map[string]any{"event_id": ev.EventID, "status": "staged", "staged": len(s.events)})
	return abi.StatusOK, b
}

// CheckSensorStaged fails t unless SensorEvent alone was staged, as
// SensorNode's, and the module reported its event_id and staged count
// (JSON values from its output) as the host answered them.
func CheckSensorStaged(t testing.TB, s *Services, eventID, staged string) {
	t.Helper()
	s.mu.Lock()
	got := append([]host.SensorEvent(nil), s.events...)
	s.mu.Unlock()
	if len(got) != 1 || got[0].EventID != "ev-1" || got[0].SensorID != SensorNode || got[0].DedupeKey != "k1" {
		t.Fatalf("staged sensor events %+v, want SensorEvent only", got)
	}
	if eventID != `"ev-1"` || staged != "1" {
		t.Errorf("module saw event_id %s, staged %s; the host staged ev-1, 1", eventID, staged)
	}
}

// CheckSensorRequests fails t unless the module sent SensorEvent, then
// InvalidEvent, each as the whole sensor_emit request.
func CheckSensorRequests(t testing.TB, s *Services) {
	t.Helper()
	want := []string{SensorEvent, InvalidEvent}
	calls := s.CallsOf(abi.HostSensorEmit)
	if len(calls) != len(want) {
		t.Fatalf("sensor_emit calls %v, want %d", calls, len(want))
	}
	for i, c := range calls {
		if !hosttest.JSONEqual(c.Raw, want[i]) {
			t.Errorf("sensor_emit request %d: %s\nwant %s", i, c.Raw, want[i])
		}
	}
}

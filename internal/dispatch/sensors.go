package dispatch

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/packs"
)

// reportedEvents returns the sensor events a completed attempt of node
// reported: those it staged with sensor_emit, then, for a sensor node,
// those of its output's "sensor_events" array (each decoded as sensor_emit
// decodes one: sensor_id defaults to the node's typeId and may not name
// another). An invalid event in the output, or more than
// host.MaxSensorEvents in all, is an error naming it: the attempt fails.
func reportedEvents(l *loaded, node string, output json.RawMessage, svc *services) ([]host.SensorEvent, error) {
	svc.mu.Lock()
	evs := slices.Clone(svc.sensorEvents)
	svc.mu.Unlock()
	if n, ok := l.manifest.Node(node); !ok || n.Kind != packs.KindSensor {
		return evs, nil
	}
	var out struct {
		SensorEvents []json.RawMessage `json:"sensor_events"`
	}
	if json.Unmarshal(output, &out) != nil {
		// Not an object, or sensor_events not an array: say so only if
		// the key is there.
		var probe map[string]json.RawMessage
		if json.Unmarshal(output, &probe) == nil && probe["sensor_events"] != nil {
			return nil, fmt.Errorf("output sensor_events: must be an array of SensorEvents")
		}
		return evs, nil
	}
	if len(evs)+len(out.SensorEvents) > host.MaxSensorEvents {
		return nil, fmt.Errorf("the attempt reported %d sensor events; the limit is %d", len(evs)+len(out.SensorEvents), host.MaxSensorEvents)
	}
	for i, raw := range out.SensorEvents {
		ev, err := host.DecodeSensorEvent(raw, node)
		if err == nil && ev.SensorID != node {
			err = fmt.Errorf("sensor_id %q is not this node's (%s)", ev.SensorID, node)
		}
		if err != nil {
			return nil, fmt.Errorf("output sensor_events[%d]: %w", i, err)
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

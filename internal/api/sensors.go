package api

import (
	"errors"
	"net/http"

	"github.com/packrun/packrun/host"
)

// CodeExpired is the error code of a sensor event past its
// freshness_deadline (422; the event is recorded, nothing created).
const CodeExpired = "expired"

// expiredBody is the 422 answer to an expired event: the error envelope
// and the record kept of it.
type expiredBody struct {
	Error  errorDetail             `json:"error"`
	Record *host.SensorEventRecord `json:"record"`
}

// postSensorEvent is POST /v1/sensor-events: a SensorEvent (the agent runtime schema §5) from
// a sensor outside packrun → 201 the record (with the task its
// proposed_task became), 200 the record of a duplicate (status deduped,
// duplicate_of), 422 an invalid or expired event.
func (s *server) postSensorEvent(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readObject(w, r)
	if err != nil {
		return err
	}
	ev, err := host.DecodeSensorEvent(b, "")
	if err == nil {
		var rec *host.SensorEventRecord
		rec, err = s.cfg.Backend.RecordSensorEvent(r.Context(), ev, host.SensorEventOptions{Tenant: tenantOf(r, ""), Origin: "api"})
		if err == nil {
			return s.sensorEventReply(w, r, rec)
		}
	}
	if errors.Is(err, host.ErrValidation) {
		ae := fromHost(err)
		ae.status = http.StatusUnprocessableEntity
		return ae
	}
	return err
}

func (s *server) sensorEventReply(w http.ResponseWriter, r *http.Request, rec *host.SensorEventRecord) error {
	s.recordCall(r, rec.TaskID, "")
	switch rec.Status {
	case host.SensorDeduped:
		reply(w, http.StatusOK, rec)
	case host.SensorExpired:
		reply(w, http.StatusUnprocessableEntity, expiredBody{Error: errorDetail{Code: CodeExpired, Field: "freshness_deadline",
			Message: "freshness_deadline: the event is past its deadline (" + rec.Event.FreshnessDeadline + "); recorded, nothing created"}, Record: rec})
	default:
		if rec.TaskID != "" && s.cfg.Dispatcher != nil {
			s.cfg.Dispatcher.Wake()
		}
		reply(w, http.StatusCreated, rec)
	}
	return nil
}

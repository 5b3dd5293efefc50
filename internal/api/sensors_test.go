package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

func TestSensorEvents(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	const ev = `{"sensor_id":"ext.watch","event_id":"e1","observed_at":"2026-01-02T15:04:05Z","source_ref":"https://example.com/1",
		"dedupe_key":"issue-1","payload":{},"proposed_task":{"task_type":"hello.wat","payload":{"name":"issue 1"}}}`
	r := e.post("/v1/sensor-events", ev)
	wantStatus(t, r, http.StatusCreated)
	rec := decode[*host.SensorEventRecord](t, r)
	if rec.Status != host.SensorTaskCreated || rec.TaskID == "" || rec.Origin != "api" {
		t.Fatalf("created %+v", rec)
	}
	task := decode[*host.TaskRecord](t, e.get("/v1/tasks/"+rec.TaskID))
	if task.Source != "sensor:ext.watch" || task.TaskType != helloTaskType {
		t.Fatalf("task %+v", task)
	}
	// The same dedupe key: 200, nothing created.
	r = e.post("/v1/sensor-events", strings.Replace(ev, `"e1"`, `"e2"`, 1))
	wantStatus(t, r, http.StatusOK)
	if d := decode[*host.SensorEventRecord](t, r); d.Status != host.SensorDeduped || d.DuplicateOf != rec.RecordID || d.TaskID != "" {
		t.Fatalf("duplicate %+v", d)
	}
	if n := len(e.listTasks("")); n != 1 {
		t.Fatalf("%d tasks after a duplicate", n)
	}
	// Expired: 422 with the record.
	r = e.post("/v1/sensor-events", strings.Replace(ev, `"dedupe_key":"issue-1",`, `"dedupe_key":"issue-2","freshness_deadline":"2020-01-01T00:00:00Z",`, 1))
	wantStatus(t, r, http.StatusUnprocessableEntity)
	exp := decode[expiredBody](t, r)
	if exp.Error.Code != CodeExpired || exp.Record == nil || exp.Record.Status != host.SensorExpired {
		t.Fatalf("expired %s", r.body)
	}
	// Invalid: 422 naming the field, nothing stored.
	for body, field := range map[string]string{
		strings.Replace(ev, `"dedupe_key":"issue-1",`, ``, 1):                                 "dedupe_key",
		strings.Replace(ev, `"observed_at":"2026-01-02T15:04:05Z"`, `"observed_at":"now"`, 1): "observed_at",
		strings.Replace(ev, `"task_type":"hello.wat"`, `"task_type":"no.such"`, 1):            "proposed_task.task_type",
		strings.Replace(ev, `"payload":{},`, `"payload":{},"extra":1,`, 1):                    "extra",
	} {
		wantError(t, e.post("/v1/sensor-events", strings.Replace(body, "issue-1", "issue-9", 1)), http.StatusUnprocessableEntity, CodeInvalid, field)
	}
	evs, err := e.backend.ListSensorEvents(t.Context(), host.SensorEventFilter{})
	if err != nil || len(evs) != 3 {
		t.Fatalf("%d records: %v", len(evs), err)
	}
}

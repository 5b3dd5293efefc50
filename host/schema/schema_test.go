package schema

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Every published schema compiles and names itself by its file.
func TestPublishedSchemasCompile(t *testing.T) {
	ids := IDs()
	if len(ids) == 0 {
		t.Fatal("no schema published")
	}
	for _, id := range ids {
		if _, err := compiled(id); err != nil {
			t.Errorf("%s: %v", id, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(Raw(id), &doc); err != nil || doc["$id"] != id {
			t.Errorf("%s: $id %v, %v", id, doc["$id"], err)
		}
	}
}

func TestValidateNamesThePath(t *testing.T) {
	const id = "agent-runtime/task.intent/v1"
	if err := Validate(id, []byte(`{"task_type":"demo.greet","source":"operator","payload":{"name":"Ada"},"priority":1,"skill_ids":["demo.greet"]}`)); err != nil {
		t.Fatalf("a valid intent: %v", err)
	}
	for doc, path := range map[string]string{
		`{"source":"x","payload":{}}`:                                                 "task_type",
		`{"task_type":"t","source":"x","payload":[]}`:                                 "payload",
		`{"task_type":"t","source":"x","payload":{},"skill_ids":[1]}`:                 "skill_ids[]",
		`{"task_type":"t","source":"x","payload":{},"schedule":{"delay_minutes":-1}}`: "schedule.delay_minutes",
		`{"task_type":"t","source":"x","payload":{},"nope":1}`:                        "nope",
	} {
		err := Validate(id, []byte(doc))
		var e *Error
		if !errors.As(err, &e) || e.Path != path {
			t.Errorf("%s: got %v (path %q), want path %q", doc, err, pathOf(e), path)
		}
	}
}

func pathOf(e *Error) string {
	if e == nil {
		return "<nil>"
	}
	return e.Path
}

// wantPath checks that doc is refused by schema id at path.
func wantPath(t *testing.T, id, doc, path string) {
	t.Helper()
	err := Validate(id, []byte(doc))
	var e *Error
	if !errors.As(err, &e) || e.Path != path {
		t.Errorf("%s: got %v (path %q), want path %q", doc, err, pathOf(e), path)
	}
}

func TestScheduleRecordSchema(t *testing.T) {
	const id = "agent-runtime/schedule.record/v1"
	good := `{"schedule_id":"sched_1","name":"hourly","enabled":true,"interval_seconds":3600,
		"next_run_at":"2026-01-02T15:00:00Z","last_run_at":null,
		"task":{"task_type":"demo.greet","source":"schedule:sched_1","payload":{}},
		"created_at":"2026-01-02T14:00:00Z","updated_at":"2026-01-02T14:00:00Z","tenant":"default"}`
	if err := Validate(id, []byte(good)); err != nil {
		t.Fatalf("a valid record: %v", err)
	}
	wantPath(t, id, strings.Replace(good, `"interval_seconds":3600`, `"interval_seconds":0`, 1), "interval_seconds")
	wantPath(t, id, strings.Replace(good, `"name":"hourly"`, `"name":""`, 1), "name")
	wantPath(t, id, strings.Replace(good, `"enabled":true`, `"enabled":"yes"`, 1), "enabled")
}

func TestSensorEventSchema(t *testing.T) {
	const id = "agent-runtime/sensor.event/v1"
	good := `{"sensor_id":"demo.watch","event_id":"e1","observed_at":"2026-01-02T15:04:05Z","source_ref":"file:a",
		"dedupe_key":"a@1","freshness_deadline":"2026-01-02T16:00:00Z","payload":{},
		"proposed_task":{"task_type":"demo.fix","source":"sensor:demo.watch","payload":{}},
		"proposed_workflow":{"template":"triage","instance_key":"a"}}`
	if err := Validate(id, []byte(good)); err != nil {
		t.Fatalf("a valid event: %v", err)
	}
	wantPath(t, id, strings.Replace(good, `"dedupe_key":"a@1",`, ``, 1), "dedupe_key")
	wantPath(t, id, strings.Replace(good, `"payload":{},`, `"payload":"x",`, 1), "payload")
	wantPath(t, id, strings.Replace(good, `"instance_key":"a"`, `"instance_key":""`, 1), "proposed_workflow.instance_key")
}

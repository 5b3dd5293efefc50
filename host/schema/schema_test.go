package schema

import (
	"encoding/json"
	"errors"
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

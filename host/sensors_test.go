package host

import (
	"errors"
	"strings"
	"testing"
)

const goodEvent = `{"sensor_id":"demo.watch","event_id":"e1","observed_at":"2026-01-02T15:04:05Z","source_ref":"file:a.txt",
	"dedupe_key":"a.txt@1","freshness_deadline":"2026-01-02T16:00:00Z","payload":{"size":3},
	"proposed_task":{"task_type":"demo.fix","payload":{"file":"a.txt"}},
	"proposed_workflow":{"template":"triage","instance_key":"a.txt","state":"new","context":{"k":1}}}`

func TestDecodeSensorEvent(t *testing.T) {
	ev, err := DecodeSensorEvent([]byte(goodEvent), "")
	if err != nil {
		t.Fatal(err)
	}
	if ev.ProposedTask.Source != "sensor:demo.watch" || ev.ProposedWorkflow.InstanceKey != "a.txt" {
		t.Fatalf("%+v", ev)
	}
	// The default sensor id fills a missing one only.
	noID := strings.Replace(goodEvent, `"sensor_id":"demo.watch",`, "", 1)
	if ev, err := DecodeSensorEvent([]byte(noID), "pack.sensor"); err != nil || ev.SensorID != "pack.sensor" || ev.ProposedTask.Source != "sensor:pack.sensor" {
		t.Fatalf("default id: %+v %v", ev, err)
	}
	for name, c := range map[string]struct{ old, new, field string }{
		"no sensor_id":       {`"sensor_id":"demo.watch",`, ``, "sensor_id"},
		"no dedupe_key":      {`"dedupe_key":"a.txt@1",`, ``, "dedupe_key"},
		"payload not object": {`"payload":{"size":3}`, `"payload":[3]`, "payload"},
		"unknown field":      {`"event_id":"e1"`, `"event_id":"e1","nope":1`, "nope"},
		"bad observed_at":    {`"observed_at":"2026-01-02T15:04:05Z"`, `"observed_at":"yesterday"`, "observed_at"},
		"bad deadline":       {`"freshness_deadline":"2026-01-02T16:00:00Z"`, `"freshness_deadline":"soon"`, "freshness_deadline"},
		"other source":       {`"task_type":"demo.fix",`, `"task_type":"demo.fix","source":"someone",`, "proposed_task.source"},
		"no task type":       {`"task_type":"demo.fix",`, ``, "task_type"},
		"workflow no key":    {`,"instance_key":"a.txt"`, ``, "proposed_workflow.instance_key"},
		"empty event_id":     {`"event_id":"e1"`, `"event_id":""`, "event_id"},
	} {
		doc := strings.Replace(goodEvent, c.old, c.new, 1)
		_, err := DecodeSensorEvent([]byte(doc), "")
		he, ok := errors.AsType[*Error](err)
		if !ok || !errors.Is(err, ErrValidation) || !strings.HasSuffix(he.Field, c.field) {
			t.Errorf("%s: %v (field %q), want field %q", name, err, fieldOf(he), c.field)
		}
	}
	for _, doc := range []string{``, `[]`, `null`, `{} {}`} {
		if _, err := DecodeSensorEvent([]byte(doc), ""); !errors.Is(err, ErrValidation) {
			t.Errorf("%q: %v", doc, err)
		}
	}
}

func fieldOf(e *Error) string {
	if e == nil {
		return "<nil>"
	}
	return e.Field
}

func FuzzDecodeSensorEvent(f *testing.F) {
	f.Add([]byte(goodEvent), "")
	f.Add([]byte(`{"event_id":"e","observed_at":"2026-01-02T15:04:05Z","source_ref":"r","dedupe_key":"k","payload":{}}`), "s")
	f.Add([]byte(`{"proposed_task":{"payload":1e999}}`), "x")
	f.Fuzz(func(t *testing.T, b []byte, def string) {
		ev, err := DecodeSensorEvent(b, def)
		if err != nil {
			if !errors.Is(err, ErrValidation) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("error of another kind: %v", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("not one line: %q", err)
			}
			return
		}
		if ValidateSensorEvent(&ev) != nil || ev.SensorID == "" || ev.DedupeKey == "" {
			t.Fatalf("accepted an invalid event: %+v", ev)
		}
	})
}

package packrun

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// Schedules belong to the token's tenant: another tenant's answers 404
// like a missing one, by id or by name, and is not listed; the scopes are
// tasks:read for reads and tasks:write for changes.
func TestAPISchedulesTenancy(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read")
	globex, _ := e.token(t, "globex", "tasks:write,tasks:read")
	reader, _ := e.token(t, "acme", "tasks:read")
	body := `{"name":"nightly","interval_seconds":86400,"task":{"task_type":"hello.c","payload":{}}}`
	if r := e.call(t, reader, "POST", "/v1/schedules", body); r.code != http.StatusForbidden {
		t.Fatalf("create with tasks:read only: %d %s", r.code, r.body)
	}
	r := e.call(t, acme, "POST", "/v1/schedules", body)
	if r.code != http.StatusCreated {
		t.Fatalf("create: %d %s", r.code, r.body)
	}
	var s host.RecurringSchedule
	json.Unmarshal([]byte(r.body), &s)
	if s.Tenant != "acme" {
		t.Fatalf("tenant %q", s.Tenant)
	}
	for _, ref := range []string{s.ScheduleID, "nightly"} {
		for _, m := range []string{"GET", "PATCH", "DELETE"} {
			b := ""
			if m == "PATCH" {
				b = `{"enabled":false}`
			}
			if r := e.call(t, globex, m, "/v1/schedules/"+ref, b); r.code != http.StatusNotFound {
				t.Fatalf("globex %s %s: %d %s", m, ref, r.code, r.body)
			}
		}
	}
	if r := e.call(t, globex, "GET", "/v1/schedules", ""); strings.Contains(r.body, s.ScheduleID) {
		t.Fatalf("globex lists acme's schedule: %s", r.body)
	}
	// globex may use the same name.
	if r := e.call(t, globex, "POST", "/v1/schedules", body); r.code != http.StatusCreated {
		t.Fatalf("globex create: %d %s", r.code, r.body)
	}
	if r := e.call(t, reader, "GET", "/v1/schedules/nightly", ""); r.code != http.StatusOK || !strings.Contains(r.body, s.ScheduleID) {
		t.Fatalf("acme reader: %d %s", r.code, r.body)
	}
}

// Sensor events are deduped per tenant (the token's), and their tasks
// belong to it.
func TestAPISensorEventsTenancy(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	acme, _ := e.token(t, "acme", "tasks:write,tasks:read")
	globex, _ := e.token(t, "globex", "tasks:write,tasks:read")
	reader, _ := e.token(t, "acme", "tasks:read")
	ev := `{"sensor_id":"ext","event_id":"e","observed_at":"2026-01-02T15:04:05Z","source_ref":"r","dedupe_key":"k",
		"payload":{},"proposed_task":{"task_type":"hello.c","payload":{"name":"s"}}}`
	if r := e.call(t, reader, "POST", "/v1/sensor-events", ev); r.code != http.StatusForbidden {
		t.Fatalf("tasks:read only: %d %s", r.code, r.body)
	}
	for _, c := range []struct {
		token, tenant string
		code          int
	}{{acme, "acme", http.StatusCreated}, {acme, "acme", http.StatusOK}, {globex, "globex", http.StatusCreated}} {
		r := e.call(t, c.token, "POST", "/v1/sensor-events", ev)
		var rec host.SensorEventRecord
		json.Unmarshal([]byte(r.body), &rec)
		if r.code != c.code || rec.Tenant != c.tenant {
			t.Fatalf("%s: %d %s", c.tenant, r.code, r.body)
		}
		if rec.TaskID != "" {
			if r := e.call(t, c.token, "GET", "/v1/tasks/"+rec.TaskID, ""); r.code != http.StatusOK {
				t.Fatalf("%s's task: %d", c.tenant, r.code)
			}
			other := globex
			if c.token == globex {
				other = acme
			}
			if r := e.call(t, other, "GET", "/v1/tasks/"+rec.TaskID, ""); r.code != http.StatusNotFound {
				t.Fatalf("another tenant sees %s's task: %d", c.tenant, r.code)
			}
		}
	}
}

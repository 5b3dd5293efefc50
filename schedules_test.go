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

package packrun

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// waitStatus waits until a task reaches want (failing the test past a
// generous deadline, or on another settled status).
func waitStatus(t *testing.T, f *fixture, taskID string, want host.TaskStatus) *host.TaskRecord {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, err := f.Store().Task(ctx, taskID)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status == want {
			return tr
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s stays %s (%s), want %s", taskID, tr.Status, tr.LastError, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// GET /v1/events shows a token its tenant's task events only, admin
// included; the events of the whole host (dispatch_*) only to a token
// with the operator scope.
func TestAPIEventsTenancy(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	acme, _ := e.token(t, "acme", "tasks:write,evidence:read")
	admin, _ := e.token(t, "acme", "admin")
	globex, _ := e.token(t, "globex", "tasks:write,evidence:read")
	ids := map[string]string{}
	for name, tok := range map[string]string{"acme": acme, "globex": globex} {
		r := e.call(t, tok, "POST", "/v1/tasks", `{"task_type":"hello.c","payload":{"name":"x"}}`)
		if r.code != http.StatusCreated {
			t.Fatalf("enqueue: %d %s", r.code, r.body)
		}
		var task host.TaskRecord
		json.Unmarshal([]byte(r.body), &task)
		ids[name] = task.TaskID
		waitStatus(t, e.fixture, task.TaskID, host.TaskCompleted)
	}
	list := func(tok, query string) map[string][]string {
		t.Helper()
		r := e.call(t, tok, "GET", "/v1/events"+query, "")
		if r.code != http.StatusOK {
			t.Fatalf("events: %d %s", r.code, r.body)
		}
		var p struct {
			Events    []host.Event `json:"events"`
			NextAfter int64        `json:"next_after"`
		}
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatal(err)
		}
		byTask := map[string][]string{}
		for _, ev := range p.Events {
			byTask[ev.TaskID] = append(byTask[ev.TaskID], ev.Type)
		}
		return byTask
	}
	got := list(acme, "")
	if len(got) != 1 || len(got[ids["acme"]]) == 0 {
		t.Fatalf("acme sees events of %v", got)
	}
	seen := map[string]bool{}
	for _, typ := range got[ids["acme"]] {
		seen[typ] = true
	}
	for _, typ := range []string{"task_enqueued", "task_claimed", "task_started", "attempt_recorded", "task_attempt_finished", "task_finished", "api_call"} {
		if !seen[typ] {
			t.Errorf("acme's task has no %s event: %v", typ, got[ids["acme"]])
		}
	}
	if got := list(globex, "?task_id="+ids["acme"]); len(got) != 0 {
		t.Fatalf("globex sees acme's task events: %v", got)
	}
	got = list(admin, "")
	if _, ok := got[ids["globex"]]; ok || len(got[ids["acme"]]) == 0 {
		t.Fatalf("acme's admin token sees %v", got)
	}
	if got := list(admin, "?type=dispatch_locked"); len(got) != 0 {
		t.Fatalf("dispatch_locked, to acme's admin token: %v", got)
	}
	operator, _ := e.token(t, "acme", "evidence:read,operator")
	if got := list(operator, "?type=dispatch_locked"); len(got[""]) == 0 {
		t.Fatalf("dispatch_locked, to an operator token: %v", got)
	}
	if got := list(operator, "?type=task_enqueued"); len(got[ids["acme"]]) != 1 || len(got[ids["globex"]]) != 1 {
		t.Fatalf("task_enqueued, to an operator token: %v", got)
	}
	if r := e.call(t, acme, "GET", "/v1/events", ""); r.code != http.StatusOK {
		t.Fatal(r.body)
	}
	// Resume and retry are bound to the tenant as cancel is: another
	// tenant's task is not found; the caller's own, in the wrong status, is
	// a conflict that names the status.
	for _, action := range []string{":retry", ":resume"} {
		if r := e.call(t, globex, "POST", "/v1/tasks/"+ids["acme"]+action, `{"value":1}`); r.code != http.StatusNotFound {
			t.Fatalf("globex %s of acme's task: %d %s", action, r.code, r.body)
		}
		if r := e.call(t, acme, "POST", "/v1/tasks/"+ids["acme"]+action, `{"value":1}`); r.code != http.StatusConflict || !strings.Contains(r.errMessage(), "task is completed") {
			t.Fatalf("acme %s of its completed task: %d %s", action, r.code, r.body)
		}
	}
	reader, _ := e.token(t, "acme", "tasks:read")
	if r := e.call(t, reader, "GET", "/v1/events", ""); r.code != http.StatusForbidden {
		t.Fatalf("without evidence:read: %d %s", r.code, r.body)
	}
}

// Events tied to no task carry their tenant (issue 29): another tenant's
// admin token lists none of a tenant's schedule_upserted,
// workflow_created, sensor_event_recorded, message_accepted or api_call
// events (nor its token ids and routes), and each tenant's admin lists its
// own; the events of the whole host (dispatch_locked, task_types_updated)
// only a token with the operator scope lists, which admin does not imply,
// with every tenant's.
func TestAPIEventsOfNoTaskTenancy(t *testing.T) {
	e := newAuthEnv(t, HandlerOptions{})
	tenants := []string{"acme", "globex"}
	admins, tokenIDs := map[string]string{}, map[string]string{}
	for _, tenant := range tenants {
		secret, tok := e.token(t, tenant, "admin")
		admins[tenant], tokenIDs[tenant] = secret, tok.ID
	}
	operator, _ := e.token(t, "ops", "evidence:read,operator")
	both, _ := e.token(t, "acme", "admin,operator")
	// operator only widens evidence:read: alone it lists nothing (403
	// naming the scope it lacks, in the error envelope).
	onlyOperator, _ := e.token(t, "ops", "operator")
	if r := e.call(t, onlyOperator, "GET", "/v1/events", ""); r.code != http.StatusForbidden || r.errCode() != "forbidden" || !strings.Contains(r.errMessage(), "evidence:read") {
		t.Fatalf("operator alone: %d %s (want 403 naming evidence:read)", r.code, r.body)
	}
	for i, tenant := range tenants {
		msg := fmt.Sprintf(`{"format":"bus-envelope","message":%s}`, messagetest.Crisis(messagetest.BusID(i+1), tenant+".watch"))
		for _, c := range []struct {
			method, path, body string
			code               int
		}{
			{"POST", "/v1/schedules", `{"name":"nightly","interval_seconds":86400,"task":{"task_type":"hello.c","payload":{"name":"s"}}}`, http.StatusCreated},
			{"POST", "/v1/workflows/goal-loop/records", `{"instance_key":"docs","context":{"goal":"g"}}`, http.StatusCreated},
			{"POST", "/v1/sensor-events", `{"sensor_id":"ext","event_id":"e","observed_at":"2026-01-02T15:04:05Z","source_ref":"r","dedupe_key":"k","payload":{}}`, http.StatusCreated},
			{"POST", "/v1/messages", msg, http.StatusCreated},
			{"PUT", "/v1/memory/notes/plan", `{"value":1}`, http.StatusOK},
		} {
			if r := e.call(t, admins[tenant], c.method, c.path, c.body); r.code != c.code {
				t.Fatalf("%s %s %s: %d %s", tenant, c.method, c.path, r.code, r.body)
			}
		}
	}
	type page struct {
		Events []host.Event `json:"events"`
	}
	list := func(tok, query string) (page, string) {
		t.Helper()
		r := e.call(t, tok, "GET", "/v1/events?limit=1000"+query, "")
		if r.code != http.StatusOK {
			t.Fatalf("events: %d %s", r.code, r.body)
		}
		var p page
		if err := json.Unmarshal([]byte(r.body), &p); err != nil {
			t.Fatal(err)
		}
		return p, r.body
	}
	untied := func(p page) map[string]int {
		n := map[string]int{}
		for _, ev := range p.Events {
			if ev.TaskID == "" {
				n[ev.Type]++
			}
		}
		return n
	}
	ownTypes := []string{host.EventScheduleUpserted, host.EventWorkflowCreated, host.EventSensorEventRecorded, host.EventMessageAccepted, "api_call"}
	hostTypes := []string{host.EventDispatchLocked, host.EventTaskTypesUpdated}
	for i, tenant := range tenants {
		other := tenants[1-i]
		p, body := list(admins[tenant], "")
		for _, leak := range []string{`"tenant":"` + other + `"`, tokenIDs[other], other + ".watch", other + "-test"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s's admin token lists %s's events: the page holds %s", tenant, other, leak)
			}
		}
		n := untied(p)
		for _, typ := range ownTypes {
			if n[typ] == 0 {
				t.Errorf("%s's admin token lists no %s event of its own: %v", tenant, typ, n)
			}
		}
		// Four api_call events tied to no task: the schedule, the
		// workflow record, the sensor event and the memory write (the
		// message's own event names the token).
		if n["api_call"] != 4 || n[host.EventScheduleUpserted] != 1 || n[host.EventMessageAccepted] != 1 {
			t.Errorf("%s's admin token lists, tied to no task: %v", tenant, n)
		}
		for _, typ := range hostTypes {
			if n[typ] != 0 {
				t.Errorf("%s's admin token lists %d %s events of the host", tenant, n[typ], typ)
			}
			if p, _ := list(admins[tenant], "&type="+typ); len(p.Events) != 0 {
				t.Errorf("%s's admin token lists %s: %+v", tenant, typ, p.Events)
			}
		}
		if p, _ := list(admins[tenant], "&type=schedule_upserted"); len(p.Events) != 1 || !strings.Contains(string(p.Events[0].Data), `"tenant":"`+tenant+`"`) {
			t.Errorf("%s's schedule_upserted: %+v", tenant, p.Events)
		}
	}
	// The operator scope: every tenant's events and the host's.
	for _, tok := range []string{operator, both} {
		p, body := list(tok, "")
		n := untied(p)
		for _, typ := range append(ownTypes, hostTypes...) {
			if n[typ] == 0 {
				t.Errorf("an operator token lists no %s event: %v", typ, n)
			}
		}
		if n[host.EventScheduleUpserted] != 2 || !strings.Contains(body, tokenIDs["acme"]) || !strings.Contains(body, tokenIDs["globex"]) {
			t.Errorf("an operator token lists, tied to no task: %v", n)
		}
	}
	// operator widens evidence:read; it is not a way in on its own.
	alone, _ := e.token(t, "ops", "operator")
	if r := e.call(t, alone, "GET", "/v1/events", ""); r.code != http.StatusForbidden {
		t.Errorf("operator alone: %d %s", r.code, r.body)
	}
}

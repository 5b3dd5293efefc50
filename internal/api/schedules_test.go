package api

import (
	"net/http"
	"testing"

	"github.com/packrun/packrun/host"
)

func TestSchedules(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	r := e.post("/v1/schedules", `{"name":"hourly","interval_seconds":3600,"task":{"task_type":"hello.wat","payload":{"name":"x"}}}`)
	wantStatus(t, r, http.StatusCreated)
	rec := decode[*host.RecurringSchedule](t, r)
	if rec.ScheduleID == "" || !rec.Enabled || rec.IntervalSeconds != 3600 || rec.Task.Source != "schedule:"+rec.ScheduleID {
		t.Fatalf("created %+v", rec)
	}
	if loc := r.header.Get("Location"); loc != "/v1/schedules/"+rec.ScheduleID {
		t.Errorf("Location %q", loc)
	}
	// Refused: nothing stored.
	for body, field := range map[string]string{
		`{"name":"","interval_seconds":1,"task":{"task_type":"hello.wat","payload":{}}}`:                 "name",
		`{"name":"a","interval_seconds":0,"task":{"task_type":"hello.wat","payload":{}}}`:                "interval_seconds",
		`{"name":"a","interval_seconds":1.5,"task":{"task_type":"hello.wat","payload":{}}}`:              "interval_seconds",
		`{"name":"a","interval_seconds":1,"task":{"task_type":"hello.wat","payload":[]}}`:                "task.payload",
		`{"name":"a","interval_seconds":1,"task":{"task_type":"hello.wat","payload":{},"nope":1}}`:       "task.nope",
		`{"name":"a","interval_seconds":1}`:                                                              "task",
		`{"name":"a","interval_seconds":1,"task":{"task_type":"hello.wat","payload":{}},"every":"5m"}`:   "every",
		`{"name":"a","interval_seconds":1,"task":{"task_type":"hello.wat","source":"me","payload":{}}}`:  "task.source",
		`{"name":"a","interval_seconds":1,"task":{"task_type":"hello.wat","priority":"x","payload":{}}}`: "task.priority",
	} {
		wantError(t, e.post("/v1/schedules", body), http.StatusBadRequest, CodeInvalid, field)
	}
	wantError(t, e.post("/v1/schedules", `{"name":"b","interval_seconds":1,"task":{"task_type":"no.such","payload":{}}}`),
		http.StatusUnprocessableEntity, CodeUnknownTaskType, "task.task_type")
	wantError(t, e.post("/v1/schedules", `{"name":"hourly","interval_seconds":60,"task":{"task_type":"hello.wat","payload":{}}}`),
		http.StatusConflict, CodeConflict, "")
	list := decode[scheduleList](t, e.get("/v1/schedules")).Schedules
	if len(list) != 1 {
		t.Fatalf("%d schedules listed", len(list))
	}
	// By name or id; PATCH pauses; DELETE removes.
	if got := decode[*host.RecurringSchedule](t, e.get("/v1/schedules/hourly")); got.ScheduleID != rec.ScheduleID {
		t.Fatalf("by name: %+v", got)
	}
	r = e.do(http.MethodPatch, "/v1/schedules/"+rec.ScheduleID, "application/json", `{"enabled":false,"interval_seconds":60}`)
	wantStatus(t, r, http.StatusOK)
	if got := decode[*host.RecurringSchedule](t, r); got.Enabled || got.IntervalSeconds != 60 {
		t.Fatalf("patched %+v", got)
	}
	wantError(t, e.do(http.MethodPatch, "/v1/schedules/hourly", "application/json", `{"name":"x"}`), http.StatusBadRequest, CodeInvalid, "name")
	wantError(t, e.do(http.MethodPatch, "/v1/schedules/hourly", "application/json", `{"interval_seconds":-1}`), http.StatusBadRequest, CodeInvalid, "interval_seconds")
	r = e.do(http.MethodDelete, "/v1/schedules/hourly", "", "")
	if r.status != http.StatusOK {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	wantError(t, e.get("/v1/schedules/hourly"), http.StatusNotFound, CodeNotFound, "")
}

package api

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// settleNext claims the next task and settles it with one attempt of the
// given outcome and machine status.
func (e *env) settleNext(outcome abi.Outcome, ms host.MachineStatus) *host.TaskRecord {
	e.t.Helper()
	ctx := context.Background()
	claimed, err := e.backend.Claim(ctx, "runner", time.Now().Add(time.Second))
	if err != nil {
		e.t.Fatal(err)
	}
	att := &host.Attempt{TaskID: claimed.TaskID, RunnerID: "runner", Pack: helloRef, ModuleSHA256: strings.Repeat("0", 64), Node: helloNode,
		RunID: claimed.TaskID, Attempt: claimed.AttemptCount, ABIVersion: "1.0", Input: json.RawMessage(`{}`), Outcome: outcome}
	if outcome == abi.Suspended {
		att.Interrupt = json.RawMessage(`{"question":"approve?"}`)
	}
	rec, err := e.backend.Finish(ctx, claimed.TaskID, host.FinishInput{Record: att, Outcome: host.TaskOutcome{MachineStatus: ms}})
	if err != nil {
		e.t.Fatal(err)
	}
	return rec
}

// :resume and :retry put a task back to pending, refuse (409) a task in
// another status, and name the caller in their events.
func TestResumeAndRetry(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	task := e.enqueue(helloIntent)
	wantError(t, e.post("/v1/tasks/"+task.TaskID+":retry", ""), http.StatusConflict, CodeConflict, "")
	wantError(t, e.post("/v1/tasks/"+task.TaskID+":resume", `{"value":1}`), http.StatusConflict, CodeConflict, "")
	if rec := e.settleNext(abi.Suspended, host.MachineBlocked); rec.Status != host.TaskBlocked {
		t.Fatalf("suspended: %s", rec.Status)
	}
	wantError(t, e.post("/v1/tasks/"+task.TaskID+":resume", `{}`), http.StatusBadRequest, CodeInvalid, "value")
	wantError(t, e.post("/v1/tasks/"+task.TaskID+":resume", `{"value":1,"by":"me"}`), http.StatusBadRequest, CodeInvalid, "by")
	wantError(t, e.post("/v1/tasks/task_nope:resume", `{"value":1}`), http.StatusNotFound, CodeNotFound, "")
	wantError(t, e.post("/v1/tasks/"+task.TaskID+":frobnicate", ""), http.StatusNotFound, CodeNotFound, "")
	wantError(t, e.get("/v1/tasks/"+task.TaskID+":resume"), http.StatusMethodNotAllowed, CodeMethodNotAllowed, "")

	r := e.post("/v1/tasks/"+task.TaskID+":resume", `{"value":{"approved":true}}`)
	wantStatus(t, r, http.StatusOK)
	rec := decode[*host.TaskRecord](t, r)
	if rec.Status != host.TaskPending || len(rec.ResumeValues) != 1 || string(rec.ResumeValues[0]) != `{"approved":true}` {
		t.Fatalf("resumed: %+v", rec)
	}
	if rec := e.settleNext(abi.Failed, host.MachineFailed); rec.Status != host.TaskPermanentFailure {
		t.Fatalf("failed: %s", rec.Status)
	}
	r = e.post("/v1/tasks/"+task.TaskID+":retry", "")
	wantStatus(t, r, http.StatusOK)
	if rec := decode[*host.TaskRecord](t, r); rec.Status != host.TaskPending || rec.AttemptCount != 2 {
		t.Fatalf("retried: %+v", rec)
	}
	p := decode[eventPage](t, e.get("/v1/events?task_id="+task.TaskID))
	var types []string
	for _, ev := range p.Events {
		switch ev.Type {
		case host.EventTaskResumed, host.EventTaskRetryRequested:
			if !strings.Contains(string(ev.Data), `"by":"api:no-auth"`) {
				t.Errorf("%s names no caller: %s", ev.Type, ev.Data)
			}
			types = append(types, ev.Type)
		case EventAPICall:
			types = append(types, ev.Type)
		}
	}
	if strings.Join(types, ",") != "api_call,task_resumed,api_call,task_retry_requested,api_call" {
		t.Fatalf("events %v", types)
	}
}

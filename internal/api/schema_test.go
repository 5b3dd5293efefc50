package api

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/host/schema"
)

// validates fails t unless doc satisfies the published schema id.
func validates(t *testing.T, id string, doc []byte) {
	t.Helper()
	if err := schema.Validate(id, doc); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
}

// Every TaskRecord the API returns, through a task's life (pending,
// blocked with an outcome, resumed, failed, retried, listed), satisfies
// agent-runtime/task.record/v1; every event, agent-runtime/runtime.event/v1.
func TestRecordsSatisfyTheirSchemas(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	r := e.post("/v1/workflows", `{"workflow_type":"w","initial_state":"s","states":[{"state_id":"s"}]}`)
	wantStatus(t, r, http.StatusCreated)
	validates(t, host.WorkflowDefinitionSchema, r.body)
	r = e.post("/v1/workflows/w/records", `{"instance_key":"i"}`)
	wantStatus(t, r, http.StatusCreated)
	validates(t, host.WorkflowRecordSchema, r.body)
	wf := decode[*host.WorkflowRecord](t, r)
	r = e.post("/v1/tasks", `{"task_type":"hello.wat","subject":"s","payload":{"name":"x"},"skill_ids":["a"],
		"workflow_ref":{"workflow_id":"`+wf.WorkflowID+`","state_id":"s","instance_key":"i"},"evidence_requirements":{"require_adapter_audit":true}}`)
	wantStatus(t, r, http.StatusCreated)
	validates(t, "agent-runtime/task.record/v1", r.body)
	task := decode[*host.TaskRecord](t, r)
	e.settleNext(abi.Suspended, host.MachineBlocked)
	for _, step := range []func() resp{
		func() resp { return e.get("/v1/tasks/" + task.TaskID) },
		func() resp { return e.post("/v1/tasks/"+task.TaskID+":resume", `{"value":{"ok":true}}`) },
		func() resp { e.settleNext(abi.Failed, host.MachineFailed); return e.get("/v1/tasks/" + task.TaskID) },
		func() resp { return e.post("/v1/tasks/"+task.TaskID+":retry", "") },
		func() resp { return e.post("/v1/tasks/"+task.TaskID+":cancel", "") },
	} {
		r := step()
		wantStatus(t, r, http.StatusOK)
		validates(t, "agent-runtime/task.record/v1", r.body)
		rec := decode[*host.TaskRecord](t, r)
		if rec.Outcome != nil {
			out, _ := json.Marshal(rec.Outcome)
			validates(t, "agent-runtime/task.outcome/v1", out)
		}
	}
	var list struct{ Tasks []json.RawMessage }
	if err := json.Unmarshal(e.get("/v1/tasks").body, &list); err != nil || len(list.Tasks) == 0 {
		t.Fatal(err)
	}
	for _, raw := range list.Tasks {
		validates(t, "agent-runtime/task.record/v1", raw)
	}
	var events struct{ Events []json.RawMessage }
	if err := json.Unmarshal(e.get("/v1/events").body, &events); err != nil || len(events.Events) < 10 {
		t.Fatalf("%v %d", err, len(events.Events))
	}
	for _, raw := range events.Events {
		validates(t, "agent-runtime/runtime.event/v1", raw)
	}
}

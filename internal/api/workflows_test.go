package api

import (
	"net/http"
	"testing"

	"github.com/packrun/packrun/host"
)

func TestWorkflows(t *testing.T) {
	e := newEnv(t, newBackend(t), nil)
	if l := decode[workflowList](t, e.get("/v1/workflows")).Workflows; len(l) != 1 || l[0].WorkflowType != host.GoalLoop {
		t.Fatalf("built in: %+v", l)
	}
	def := `{"workflow_type":"greet","initial_state":"hello","states":[{"state_id":"hello","task_type":"hello.wat","emits_task_intent":true,
		"transitions":[{"signal":"greeted","next_state":"done"}]},{"state_id":"done","completion_signals":["bye"]}]}`
	r := e.post("/v1/workflows", def)
	wantStatus(t, r, http.StatusCreated)
	wantStatus(t, e.post("/v1/workflows", def), http.StatusOK)
	for body, field := range map[string]string{
		`{"workflow_type":"x","initial_state":"a","states":[{"state_id":"a"}],"extra":1}`:                                       "extra",
		`{"workflow_type":"x","initial_state":"b","states":[{"state_id":"a"}]}`:                                                 "initial_state",
		`{"workflow_type":"x","initial_state":"a","states":[{"state_id":"a","transitions":[{"signal":"s","next_state":"q"}]}]}`: "states[0].transitions[0].next_state",
		`{"workflow_type":"x","initial_state":"a","states":[{"state_id":"a","emits_task_intent":true}]}`:                        "states[0].task_type",
	} {
		wantError(t, e.post("/v1/workflows", body), http.StatusBadRequest, CodeInvalid, field)
	}
	wantError(t, e.get("/v1/workflows/x"), http.StatusNotFound, CodeNotFound, "")
	if got := decode[*host.WorkflowDefinition](t, e.get("/v1/workflows/greet")); got.InitialState != "hello" {
		t.Fatalf("greet: %+v", got)
	}

	r = e.post("/v1/workflows/greet/records", `{"instance_key":"k1","context":{"name":"wf"}}`)
	wantStatus(t, r, http.StatusCreated)
	rec := decode[*host.WorkflowRecord](t, r)
	if rec.CurrentState != "hello" || rec.Status != host.WorkflowActive || r.header.Get("Location") != "/v1/workflow-records/"+rec.WorkflowID {
		t.Fatalf("started %+v", rec)
	}
	r = e.post("/v1/workflows/greet/records", `{"instance_key":"k1"}`)
	wantStatus(t, r, http.StatusOK)
	if again := decode[*host.WorkflowRecord](t, r); again.WorkflowID != rec.WorkflowID {
		t.Fatalf("again: %+v", again)
	}
	// Its first state's task was enqueued, tied to the record.
	tasks := e.listTasks("?task_type=hello.wat")
	if len(tasks) != 1 || tasks[0].WorkflowRef == nil || tasks[0].WorkflowRef.WorkflowID != rec.WorkflowID {
		t.Fatalf("tasks %+v", tasks)
	}
	wantError(t, e.post("/v1/workflows/greet/records", `{"instance_key":""}`), http.StatusBadRequest, CodeInvalid, "instance_key")
	wantError(t, e.post("/v1/workflows/greet/records", `{"instance_key":"k2","state":"nope"}`), http.StatusBadRequest, CodeInvalid, "state")
	wantError(t, e.post("/v1/workflows/greet/records", `{"instance_key":"k2","context":[1]}`), http.StatusBadRequest, CodeInvalid, "context")
	wantError(t, e.post("/v1/workflows/greet/records", `{"instance_key":"k2","tenant":"x"}`), http.StatusBadRequest, CodeInvalid, "tenant")
	wantError(t, e.post("/v1/workflows/nope/records", `{"instance_key":"k2"}`), http.StatusNotFound, CodeNotFound, "")

	if l := decode[workflowRecordList](t, e.get("/v1/workflow-records?type=greet")).Records; len(l) != 1 {
		t.Fatalf("records %+v", l)
	}
	if l := decode[workflowRecordList](t, e.get("/v1/workflow-records?type=goal-loop")).Records; len(l) != 0 {
		t.Fatalf("goal-loop records %+v", l)
	}
	if got := decode[*host.WorkflowRecord](t, e.get("/v1/workflow-records/"+rec.WorkflowID)); got.InstanceKey != "k1" {
		t.Fatalf("get %+v", got)
	}
	wantError(t, e.get("/v1/workflow-records/wf_nope"), http.StatusNotFound, CodeNotFound, "")
	r = e.post("/v1/workflow-records/"+rec.WorkflowID+":cancel", "")
	wantStatus(t, r, http.StatusOK)
	if got := decode[*host.WorkflowRecord](t, r); got.Status != host.WorkflowCanceled {
		t.Fatalf("canceled %+v", got)
	}
	wantError(t, e.post("/v1/workflow-records/"+rec.WorkflowID+":cancel", ""), http.StatusConflict, CodeConflict, "")
	wantError(t, e.post("/v1/workflow-records/"+rec.WorkflowID, ""), http.StatusMethodNotAllowed, CodeMethodNotAllowed, "")
}

package packrun

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/api"
	"github.com/packrun/packrun/internal/auth"
	"github.com/packrun/packrun/internal/message/messagetest"
)

// refusal is one refusal a route's handler can return.
type refusal struct {
	kind string // invalid, schema, not found, tenant, conflict
	// path, with {task}, {attempt}, {artifact}, {schedule}, {record},
	// {canceled}, {run} and {message} standing for tenant acme's.
	path, body    string
	status        int
	code, field   string
	asGlobex      bool   // sent by tenant globex's token (every scope but admin), not acme's admin
	sameAsMissing string // for a tenant refusal: the path of what does not exist, answered the same
}

// routeRefusals is a route's scope ("" any token) and the refusals of its
// handler. Every route is also driven without a token (401), without its
// scope (403), with an unknown query parameter (400), with a method it
// does not serve (405) and over the token's rate (429).
type routeRefusals struct {
	scope auth.Scope
	r     []refusal
}

// publicRoutes are served without a token and without a rate (200 for
// both): the API's description.
var publicRoutes = map[string]bool{"GET /v1/openapi.json": true, "GET /.well-known/openwop": true}

const (
	stBad      = http.StatusBadRequest
	stForbid   = http.StatusForbidden
	stNotFound = http.StatusNotFound
	stConflict = http.StatusConflict
	stUnproc   = http.StatusUnprocessableEntity
)

func nf(path string) refusal {
	return refusal{kind: "not found", path: path, status: stNotFound, code: "not_found"}
}

// foreign: globex asks for acme's path, answered as missing is.
func foreign(path, missing string) refusal {
	return refusal{kind: "tenant", path: path, status: stNotFound, code: "not_found", asGlobex: true, sameAsMissing: missing}
}

func inval(path, body string, status int, code, field string) refusal {
	return refusal{kind: "invalid", path: path, body: body, status: status, code: code, field: field}
}

func conflictOn(path, body string) refusal {
	return refusal{kind: "conflict", path: path, body: body, status: stConflict, code: "conflict"}
}

// apiRefusals has an entry for every route of api.Routes():
// TestAPIRouteRefusals fails on a route without one.
var apiRefusals = map[string]routeRefusals{
	"GET /v1/tasks": {auth.ScopeTasksRead, []refusal{inval("/v1/tasks?status=bogus", "", stBad, "invalid", "status"),
		inval("/v1/tasks?cursor=no%20such", "", stBad, "invalid", "cursor"), inval("/v1/tasks?cursor=task_nope", "", stBad, "invalid", "cursor"),
		{kind: "tenant", path: "/v1/tasks?cursor={task}", status: stBad, code: "invalid", field: "cursor", asGlobex: true, sameAsMissing: "/v1/tasks?cursor=task_nope"}}},
	"POST /v1/tasks": {auth.ScopeTasksWrite, []refusal{
		inval("/v1/tasks", `{"task_type":`, stBad, "bad_request", ""),
		inval("/v1/tasks", `{"task_type":"hello.c","task_type":"hello.c"}`, stBad, "invalid", "task_type"),
		{kind: "schema", path: "/v1/tasks", body: `{"task_type":"no.such","payload":{}}`, status: stUnproc, code: "unknown_task_type", field: "task_type"},
	}},
	"GET /v1/tasks/{id}": {auth.ScopeTasksRead, []refusal{nf("/v1/tasks/task_missing"), foreign("/v1/tasks/{task}", "/v1/tasks/task_missing")}},
	"POST /v1/tasks/{id}": {auth.ScopeTasksWrite, []refusal{
		nf("/v1/tasks/task_missing:cancel"), foreign("/v1/tasks/{task}:cancel", "/v1/tasks/task_missing:cancel"),
		foreign("/v1/tasks/{task}:retry", "/v1/tasks/task_missing:retry"),
		nf("/v1/tasks/{task}:explode"),
		inval("/v1/tasks/{task}:resume", `{}`, stBad, "invalid", "value"),
		conflictOn("/v1/tasks/{task}:cancel", ""), conflictOn("/v1/tasks/{task}:resume", `{"value":1}`),
	}},
	"GET /v1/tasks/{id}/events": {auth.ScopeEvidenceRead, []refusal{nf("/v1/tasks/task_missing/events"), foreign("/v1/tasks/{task}/events", "/v1/tasks/task_missing/events")}},
	"GET /v1/events": {auth.ScopeEvidenceRead, []refusal{inval("/v1/events?type=Not-A-Type", "", stBad, "invalid", "type"), inval("/v1/events?after=-1", "", stBad, "invalid", "after"),
		inval("/v1/events?cursor=x", "", stBad, "invalid", "cursor"), inval("/v1/events?cursor=1&after=1", "", stBad, "invalid", "after")}},
	"GET /v1/attempts": {auth.ScopeEvidenceRead, []refusal{
		inval("/v1/attempts?since=yesterday", "", stBad, "invalid", "since"),
		inval("/v1/attempts?cursor=0", "", stBad, "invalid", "cursor"),
		{kind: "tenant", path: "/v1/attempts?tenant=acme", status: stForbid, code: "forbidden", field: "tenant", asGlobex: true},
	}},
	"GET /v1/attempts/{id}": {auth.ScopeEvidenceRead, []refusal{nf("/v1/attempts/att_missing"), foreign("/v1/attempts/{attempt}", "/v1/attempts/att_missing")}},
	"POST /v1/attempts/{id}": {auth.ScopeEvidenceRead, []refusal{
		nf("/v1/attempts/att_missing:replay"), foreign("/v1/attempts/{attempt}:replay", "/v1/attempts/att_missing:replay"), nf("/v1/attempts/{attempt}"),
	}},
	"GET /v1/artifacts/{id}":      {auth.ScopeEvidenceRead, []refusal{nf("/v1/artifacts/art_missing"), foreign("/v1/artifacts/{artifact}", "/v1/artifacts/art_missing")}},
	"GET /v1/evidence/checkpoint": {"", nil},
	"GET /v1/evidence/proof/inclusion": {auth.ScopeEvidenceRead, []refusal{
		inval("/v1/evidence/proof/inclusion", "", stBad, "invalid", "entry"),
		inval("/v1/evidence/proof/inclusion?entry={attempt}&size=x", "", stBad, "invalid", "size"),
		inval("/v1/evidence/proof/inclusion?entry={attempt}&size=0", "", stBad, "invalid", "size"),
		{kind: "not found", path: "/v1/evidence/proof/inclusion?entry=att_missing", status: stNotFound, code: "not_found", field: "entry"},
		{kind: "tenant", path: "/v1/evidence/proof/inclusion?entry={attempt}", status: stNotFound, code: "not_found", field: "entry", asGlobex: true, sameAsMissing: "/v1/evidence/proof/inclusion?entry=att_missing"},
		{kind: "tenant", path: "/v1/evidence/proof/inclusion?entry={seq}", status: stNotFound, code: "not_found", field: "entry", asGlobex: true, sameAsMissing: "/v1/evidence/proof/inclusion?entry=987654321"},
	}},
	"GET /v1/evidence/proof/consistency": {auth.ScopeEvidenceRead, []refusal{
		inval("/v1/evidence/proof/consistency?from=3&to=2", "", stBad, "invalid", "from"),
		inval("/v1/evidence/proof/consistency?to=2", "", stBad, "invalid", "from"),
		inval("/v1/evidence/proof/consistency?from=1&to=x", "", stBad, "invalid", "to"),
		{kind: "not found", path: "/v1/evidence/proof/consistency?from=1&to=987654321", status: stNotFound, code: "not_found"},
	}},
	"GET /v1/memory/{namespace}":       {auth.ScopeMemoryRead, []refusal{inval("/v1/memory/notes?prefix=a&prefix=b", "", stBad, "invalid", "prefix")}},
	"GET /v1/memory/{namespace}/{key}": {auth.ScopeMemoryRead, []refusal{nf("/v1/memory/notes/nothing"), foreign("/v1/memory/notes/plan", "/v1/memory/notes/nothing")}},
	"PUT /v1/memory/{namespace}/{key}": {auth.ScopeMemoryWrite, []refusal{
		inval("/v1/memory/notes/k", `{}`, stBad, "invalid", "value"), inval("/v1/memory/notes/k?ttl=-1s", `{"value":1}`, stBad, "invalid", "ttl"),
		inval("/v1/memory/notes/k", `{"value":1,"value":2}`, stBad, "invalid", "value"),
	}},
	"DELETE /v1/memory/{namespace}/{key}": {auth.ScopeMemoryWrite, nil},
	"GET /v1/schedules":                   {auth.ScopeTasksRead, nil},
	"POST /v1/schedules": {auth.ScopeTasksWrite, []refusal{
		inval("/v1/schedules", `{"name":"b","interval_seconds":0,"task":{"task_type":"hello.c","payload":{}}}`, stBad, "invalid", "interval_seconds"),
		{kind: "schema", path: "/v1/schedules", body: `{"name":"b","interval_seconds":60,"task":{"task_type":"no.such","payload":{}}}`, status: stUnproc, code: "unknown_task_type", field: "task.task_type"},
		conflictOn("/v1/schedules", `{"name":"hourly","interval_seconds":60,"task":{"task_type":"hello.c","payload":{}}}`),
	}},
	"GET /v1/schedules/{id}": {auth.ScopeTasksRead, []refusal{nf("/v1/schedules/sched_missing"), foreign("/v1/schedules/{schedule}", "/v1/schedules/sched_missing")}},
	"PATCH /v1/schedules/{id}": {auth.ScopeTasksWrite, []refusal{
		{kind: "not found", path: "/v1/schedules/sched_missing", body: `{"enabled":true}`, status: stNotFound, code: "not_found"},
		{kind: "tenant", path: "/v1/schedules/{schedule}", body: `{"enabled":true}`, status: stNotFound, code: "not_found", asGlobex: true, sameAsMissing: "/v1/schedules/sched_missing"},
		inval("/v1/schedules/{schedule}", `{"interval_seconds":0}`, stBad, "invalid", "interval_seconds"),
	}},
	"DELETE /v1/schedules/{id}": {auth.ScopeTasksWrite, []refusal{nf("/v1/schedules/sched_missing"), foreign("/v1/schedules/{schedule}", "/v1/schedules/sched_missing")}},
	"POST /v1/sensor-events":    {auth.ScopeTasksWrite, []refusal{inval("/v1/sensor-events", `{"sensor_id":"x","nope":1}`, stUnproc, "invalid", "nope")}},
	"GET /v1/messages": {auth.ScopeMessagesRead, []refusal{inval("/v1/messages?after=x", "", stBad, "invalid", "after"),
		inval("/v1/messages?cursor=-1", "", stBad, "invalid", "cursor")}},
	"POST /v1/messages": {auth.ScopeMessagesWrite, []refusal{
		{kind: "schema", path: "/v1/messages", body: `{"message":{}}`, status: stUnproc, code: "message_refused"},
		{kind: "conflict", path: "/v1/messages", body: "{conflicting message}", status: stConflict, code: "conflict"},
	}},
	"GET /v1/messages/{id}": {auth.ScopeMessagesRead, []refusal{
		nf("/v1/messages/7ZZZZZZZZZZZZZZZZZZZZZZZZZ"), foreign("/v1/messages/{message}", "/v1/messages/7ZZZZZZZZZZZZZZZZZZZZZZZZZ"),
		inval("/v1/messages/{message}?format=xml", "", stBad, "invalid", "format"),
	}},
	"POST /v1/invoke": {auth.ScopeInvoke, []refusal{
		{kind: "schema", path: "/v1/invoke", body: `{"pack":"local.hello.wat","input":{"name":5}}`, status: stUnproc, code: "input_schema_violation", field: "input.name"},
		{kind: "not found", path: "/v1/invoke", body: `{"pack":"local.nope"}`, status: stNotFound, code: "not_found", field: "pack"},
		inval("/v1/invoke", `{"pack":"local.hello.wat","input":[1]}`, stBad, "invalid", "input"),
		{kind: "tenant", path: "/v1/invoke", body: `{"pack":"local.hello.c","tenant":"acme"}`, status: stForbid, code: "forbidden", field: "tenant", asGlobex: true},
	}},
	"GET /v1/packs": {"", nil},
	// openwop's pack registry read API: packs are home-wide, so any token
	// reads it (serve --public-pack-registry: no token needed).
	"GET /v1/packs/-/search": {"", []refusal{inval("/v1/packs/-/search?q="+strings.Repeat("a", 257), "", stBad, "invalid", "q")}},
	"GET /v1/packs/{name}": {"", []refusal{
		{kind: "not openwop's name", path: "/v1/packs/local.hello.c", status: stBad, code: "invalid_pack_name", field: "name"},
		{kind: "not found", path: "/v1/packs/vendor.acme.nothing", status: stNotFound, code: "pack_not_found", field: "name"}}},
	"GET /v1/packs/{name}/-/{file}": {"", []refusal{
		{kind: "not openwop's name", path: "/v1/packs/not-reverse-dns/-/1.0.0.json", status: stBad, code: "invalid_pack_name", field: "name"},
		{kind: "not semver", path: "/v1/packs/vendor.acme.nothing/-/not-a-version.json", status: stBad, code: "invalid_version", field: "version"},
		{kind: "not found", path: "/v1/packs/vendor.acme.nothing/-/1.0.0.json", status: stNotFound, code: "pack_not_found"},
		{kind: "not found", path: "/v1/packs/vendor.acme.nothing/-/1.0.0.tgz", status: stNotFound, code: "pack_not_found"},
		{kind: "not found", path: "/v1/packs/vendor.acme.nothing/-/1.0.0.zip", status: stNotFound, code: "pack_not_found"},
		{kind: "no signature", path: "/v1/packs/vendor.acme.nothing/-/1.0.0.sig", status: stNotFound, code: "signature_not_available"},
		{kind: "no keychain", path: "/v1/packs/vendor.acme.nothing/-/keychain", status: stNotFound, code: "keychain_not_available"}}},
	"GET /v1/task-types":              {auth.ScopeTasksRead, nil},
	"GET /v1/task-types/{type...}":    {auth.ScopeTasksRead, []refusal{nf("/v1/task-types/no.such")}},
	"PUT /v1/task-types/{type...}":    {auth.ScopeAdmin, []refusal{inval("/v1/task-types/x.y", `{"nope":1}`, stBad, "invalid", "nope")}},
	"DELETE /v1/task-types/{type...}": {auth.ScopeAdmin, []refusal{nf("/v1/task-types/no.such")}},
	"GET /v1/workflows":               {auth.ScopeTasksRead, nil},
	"POST /v1/workflows": {auth.ScopeAdmin, []refusal{
		inval("/v1/workflows", `{"workflow_type":"x","initial_state":"b","states":[{"state_id":"a"}]}`, stBad, "invalid", "initial_state"),
	}},
	"GET /v1/workflows/{type}": {auth.ScopeTasksRead, []refusal{nf("/v1/workflows/no.such")}},
	"POST /v1/workflows/{type}/records": {auth.ScopeTasksWrite, []refusal{
		{kind: "not found", path: "/v1/workflows/no.such/records", body: `{"instance_key":"k"}`, status: stNotFound, code: "not_found"},
		inval("/v1/workflows/greet/records", `{"instance_key":""}`, stBad, "invalid", "instance_key"),
	}},
	"GET /v1/workflow-records":      {auth.ScopeTasksRead, []refusal{inval("/v1/workflow-records?limit=0", "", stBad, "invalid", "limit")}},
	"GET /v1/workflow-records/{id}": {auth.ScopeTasksRead, []refusal{nf("/v1/workflow-records/wf_missing"), foreign("/v1/workflow-records/{record}", "/v1/workflow-records/wf_missing")}},
	"POST /v1/workflow-records/{id}": {auth.ScopeTasksWrite, []refusal{
		nf("/v1/workflow-records/wf_missing:cancel"), foreign("/v1/workflow-records/{record}:cancel", "/v1/workflow-records/wf_missing:cancel"),
		conflictOn("/v1/workflow-records/{canceled}:cancel", ""),
	}},
	"GET /v1/agents":           {auth.ScopeTasksRead, nil},
	"GET /v1/profiles":         {auth.ScopeTasksRead, nil},
	"GET /v1/skills":           {"", nil},
	"GET /.well-known/packrun": {"", nil},
	"GET /.well-known/openwop": {"", nil},
	"POST /v1/openwop/workflows": {auth.ScopeTasksWrite, []refusal{
		inval("/v1/openwop/workflows", `{"workflowId":"w","nodes":"x"}`, stBad, "invalid", "nodes"),
		inval("/v1/openwop/workflows", `{"id":"w","name":"w","version":"1","nodes":[{"id":"n","typeId":"core.noop","name":"n","position":{"x":0,"y":0},"config":{},"inputs":{}}],"edges":[],"triggers":[{"id":"t","type":"webhook"}],"variables":[],"metadata":{},"settings":{}}`, stUnproc, "unsupported", "triggers[0].type"),
		inval("/v1/openwop/workflows", `{"id":"w","name":"w","version":"1","nope":1}`, stBad, "invalid", "nope"),
		conflictOn("/v1/openwop/workflows", `{"workflowId":"conformance-wasm-pack-roundtrip","nodes":[{"id":"greet","typeId":"example.hello"}]}`),
	}},
	"POST /v1/runs": {auth.ScopeInvoke, []refusal{
		inval("/v1/runs", `{"workflowId":1}`, stBad, "invalid", "workflowId"),
		inval("/v1/runs", `{"workflowId":"conformance-cap-breach","configurable":{"recursionLimit":0}}`, stBad, "invalid", "configurable.recursionLimit"),
		inval("/v1/runs", `{"workflowId":"conformance-cap-breach","configurable":{"recursionLimit":10001}}`, stBad, "invalid", "configurable.recursionLimit"),
		{kind: "not found", path: "/v1/runs", body: `{"workflowId":"no.such"}`, status: stNotFound, code: "not_found"},
		inval("/v1/runs", `{"workflowId":"wf1","configurable":{"recursionLimit":0}}`, stBad, "invalid", "configurable.recursionLimit"),
		inval("/v1/runs", `{"workflowId":"wf1","configurable":{"model":"x"}}`, stBad, "invalid", "configurable.model"),
	}},
	"GET /v1/runs/{id}": {auth.ScopeTasksRead, []refusal{nf("/v1/runs/run_missing"), foreign("/v1/runs/{run}", "/v1/runs/run_missing")}},
	"POST /v1/runs/{id}": {auth.ScopeInvoke, []refusal{
		nf("/v1/runs/run_missing:cancel"), foreign("/v1/runs/{run}:cancel", "/v1/runs/run_missing:cancel"),
		{kind: "tenant", path: "/v1/runs/{run}:fork", body: `{"mode":"replay"}`, status: stNotFound, code: "not_found", asGlobex: true, sameAsMissing: "/v1/runs/run_missing:fork"},
		conflictOn("/v1/runs/{run}:cancel", ""),
		inval("/v1/runs/{run}:fork", `{"mode":"branch"}`, stBad, "invalid", "mode"),
	}},
	"GET /v1/runs/{id}/events": {auth.ScopeTasksRead, []refusal{nf("/v1/runs/run_missing/events"), foreign("/v1/runs/{run}/events", "/v1/runs/run_missing/events")}},
	"GET /v1/runs/{id}/events/poll": {auth.ScopeTasksRead, []refusal{nf("/v1/runs/run_missing/events/poll"), foreign("/v1/runs/{run}/events/poll", "/v1/runs/run_missing/events/poll"),
		inval("/v1/runs/{run}/events/poll?lastSequence=-1", "", stBad, "invalid", "lastSequence"), inval("/v1/runs/{run}/events/poll?timeout=31", "", stBad, "invalid", "timeout")}},
	"POST /v1/runs/{id}/cancel": {auth.ScopeInvoke, []refusal{nf("/v1/runs/run_missing/cancel"), foreign("/v1/runs/{run}/cancel", "/v1/runs/run_missing/cancel"), conflictOn("/v1/runs/{run}/cancel", "")}},
	"POST /v1/runs/{id}/interrupts/{nodeId}": {auth.ScopeInvoke, []refusal{
		{kind: "not found", path: "/v1/runs/run_missing/interrupts/gate", body: `{"resumeValue":{"action":"accept"}}`, status: stNotFound, code: "not_found"},
		{kind: "tenant", path: "/v1/runs/{run}/interrupts/greet", body: `{"resumeValue":{"action":"accept"}}`, status: stNotFound, code: "not_found", asGlobex: true, sameAsMissing: "/v1/runs/run_missing/interrupts/greet"},
		conflictOn("/v1/runs/{run}/interrupts/greet", `{"resumeValue":{"action":"accept"}}`),
		inval("/v1/runs/{run}/interrupts/greet", `{"value":1}`, stBad, "invalid", "value")}},
	"GET /v1/audit/verify": {auth.ScopeEvidenceRead, []refusal{inval("/v1/audit/verify?fromSeq=-1", "", stBad, "invalid", "fromSeq"),
		inval("/v1/audit/verify?toSeq=x", "", stBad, "invalid", "toSeq"), inval("/v1/audit/verify?fromSeq=5&toSeq=2", "", stBad, "invalid", "fromSeq")}},
	"GET /v1/openapi.json": {"", nil},
	// No witness configured (serve --witness): nothing cosigned to serve.
	"GET /v1/evidence/checkpoint/cosigned": {"", []refusal{nf("/v1/evidence/checkpoint/cosigned")}},
}

// acmeObjects makes one of each of tenant acme's things and returns the
// placeholders of apiRefusals' paths, and the body of a message that
// conflicts with acme's.
func acmeObjects(t *testing.T, e *refusalEnv, acme string) (map[string]string, string) {
	t.Helper()
	ids := map[string]string{}
	must := func(method, path, body string, want int) apiReply {
		t.Helper()
		r := e.call(t, acme, method, path, body)
		if r.code != want {
			t.Fatalf("acme %s %s: %d %s", method, path, r.code, r.body)
		}
		return r
	}
	field := func(r apiReply, keys ...string) string {
		t.Helper()
		var v any
		json.Unmarshal([]byte(r.body), &v)
		for _, k := range keys {
			m, _ := v.(map[string]any)
			v = m[k]
		}
		s, _ := v.(string)
		if s == "" {
			t.Fatalf("no %v in %s", keys, r.body)
		}
		return s
	}
	ids["task"] = field(must("POST", "/v1/tasks", `{"task_type":"hello.c","payload":{"name":"acme"}}`, http.StatusCreated), "task_id")
	deadline := time.Now().Add(30 * time.Second)
	for {
		tr, err := e.Store().Task(ctx, ids["task"])
		if err != nil {
			t.Fatal(err)
		}
		if tr.Status == host.TaskCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme's task stays %s", tr.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	atts, err := e.Store().ListAttempts(ctx, host.AttemptFilter{TaskID: ids["task"]})
	if err != nil || len(atts) != 1 {
		t.Fatalf("acme's attempt: %v %v", atts, err)
	}
	ids["attempt"] = atts[0].AttemptID
	ids["seq"] = strconv.FormatInt(atts[0].EventSeq, 10)
	art, err := e.Store().PutArtifact(ctx, host.ArtifactInput{TaskID: ids["task"], AttemptID: ids["attempt"], Role: "output", Name: "out.txt", Data: []byte("acme")})
	if err != nil {
		t.Fatal(err)
	}
	ids["artifact"] = art.ArtifactID
	must("PUT", "/v1/memory/notes/plan", `{"value":1}`, http.StatusOK)
	ids["schedule"] = field(must("POST", "/v1/schedules", `{"name":"hourly","interval_seconds":3600,"enabled":false,"task":{"task_type":"hello.c","payload":{"name":"x"}}}`, http.StatusCreated), "schedule_id")
	must("POST", "/v1/workflows", `{"workflow_type":"greet","initial_state":"hello","states":[{"state_id":"hello","task_type":"hello.c","emits_task_intent":true,
		"transitions":[{"signal":"greeted","next_state":"done"}]},{"state_id":"done","completion_signals":["bye"]}]}`, http.StatusCreated)
	ids["record"] = field(must("POST", "/v1/workflows/greet/records", `{"instance_key":"k1"}`, http.StatusCreated), "workflow_id")
	ids["canceled"] = field(must("POST", "/v1/workflows/greet/records", `{"instance_key":"k2"}`, http.StatusCreated), "workflow_id")
	must("POST", "/v1/workflow-records/"+ids["canceled"]+":cancel", "", http.StatusOK)
	must("POST", "/v1/openwop/workflows", `{"workflowId":"wf1","nodes":[{"id":"greet","typeId":"example.hello"}]}`, http.StatusCreated)
	ids["run"] = field(must("POST", "/v1/runs", `{"workflowId":"wf1","inputs":{"name":"a"}}`, http.StatusCreated), "runId")
	for {
		run, err := e.GetRun(ctx, "acme", ids["run"])
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("acme's run stays %s", run.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Seed 000's example, unsigned (its signature is not a real one).
	var msg map[string]any
	if err := json.Unmarshal(messagetest.Seed("seed000/example1.json"), &msg); err != nil {
		t.Fatal(err)
	}
	delete(msg, "signature")
	doc, _ := json.Marshal(msg)
	ids["message"] = field(must("POST", "/v1/messages", `{"format":"agent-envelope","message":`+string(doc)+`}`, http.StatusCreated), "message", "message_id")
	msg["intent"] = "query"
	other, _ := json.Marshal(msg)
	return ids, `{"format":"agent-envelope","message":` + string(other) + `}`
}

// openwopCodes are openwop's names of packrun's refusals that openwop
// names (rest-endpoints.md, "Error response shape").
var openwopCodes = map[string]string{"unauthorized": "unauthenticated", "invalid": "validation_error", "bad_request": "validation_error", "internal": "internal_error"}

// errorEnvelope checks r is the documented error envelope, exactly
// {"error":{"code","message","field"?}}, or on the openwop routes exactly
// openwop's {"error","message","details"?} with details.field, with status
// and code (and field, when given), a one-line message, as JSON.
func errorEnvelope(t *testing.T, what string, r apiReply, status int, code, field string) {
	t.Helper()
	if r.path == "/.well-known/openwop" || strings.HasPrefix(r.path, "/v1/runs") || strings.HasPrefix(r.path, "/v1/openwop/") || strings.HasPrefix(r.path, "/v1/packs/") {
		openwopEnvelope(t, what, r, status, code, field)
		return
	}
	var env map[string]json.RawMessage
	var d struct{ Code, Message, Field string }
	if r.code != status || r.header.Get("Content-Type") != "application/json" ||
		json.Unmarshal([]byte(r.body), &env) != nil || len(env) != 1 || json.Unmarshal(env["error"], &d) != nil {
		t.Errorf("%s: %d %q %s, want %d %s in the error envelope", what, r.code, r.header.Get("Content-Type"), r.body, status, code)
		return
	}
	if d.Code != code || d.Message == "" || strings.ContainsAny(d.Message, "\n") || strings.Contains(d.Message, "goroutine") || field != "" && d.Field != field {
		t.Errorf("%s: %d %s, want code %s field %q", what, r.code, r.body, code, field)
	}
}

// openwopEnvelope is errorEnvelope on an openwop route.
func openwopEnvelope(t *testing.T, what string, r apiReply, status int, code, field string) {
	t.Helper()
	if c, ok := openwopCodes[code]; ok {
		code = c
	}
	var env map[string]json.RawMessage
	var d struct {
		Error, Message string
		Details        *struct{ Field string }
	}
	if r.code != status || r.header.Get("Content-Type") != "application/json" ||
		json.Unmarshal([]byte(r.body), &env) != nil || json.Unmarshal([]byte(r.body), &d) != nil {
		t.Errorf("%s: %d %q %s, want %d %s in openwop's error envelope", what, r.code, r.header.Get("Content-Type"), r.body, status, code)
		return
	}
	for k := range env {
		if k != "error" && k != "message" && k != "details" {
			t.Errorf("%s: key %q outside openwop's envelope: %s", what, k, r.body)
		}
	}
	gotField := ""
	if d.Details != nil {
		gotField = d.Details.Field
	}
	if d.Error != code || d.Message == "" || strings.ContainsAny(d.Message, "\n") || field != "" && gotField != field {
		t.Errorf("%s: %d %s, want error %s field %q", what, r.code, r.body, code, field)
	}
}

// differ returns what a and b do not have in common (the ids in two
// paths otherwise the same).
func differ(a, b string) (string, string) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	return a[p : len(a)-s], b[p : len(b)-s]
}

// samplePath is a path the pattern matches (each wildcard "x1").
func samplePath(pattern string) string {
	return regexp.MustCompile(`\{[^}]*\}`).ReplaceAllString(pattern, "x1")
}

// Every API route, driven through the Host's handler with every kind of
// refusal its handler can return: each is the documented error envelope
// with its status and code, another tenant's object answers exactly as a
// missing one, a token without the scope is refused before anything is
// looked up (the same answer for another tenant's object and a missing
// one), and no request panics. A route without an entry in apiRefusals
// fails the test.
func TestAPIRouteRefusals(t *testing.T) {
	routes := api.Routes()
	for _, rt := range routes {
		if _, ok := apiRefusals[rt]; !ok {
			t.Errorf("route %s has no entry in apiRefusals: list the refusals its handler can return", rt)
		}
	}
	for rt := range apiRefusals {
		if !slices.Contains(routes, rt) {
			t.Errorf("apiRefusals has %s, which is not a route", rt)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	served := map[string][]string{} // path pattern -> methods
	for _, rt := range routes {
		m, p, _ := strings.Cut(rt, " ")
		served[p] = append(served[p], m)
	}

	e := newRefusalEnv(t, HandlerOptions{}, packSpec{name: "local.hello.c", version: "1.0.0", module: "examples/hello-c/hello.wasm",
		nodes: `[{"typeId":"example.hello","kind":"skill","taskTypes":["hello.c"]}]`}, helloSchemas("1.0.0", `{"type":"object"}`))
	acme, _ := e.token(t, "acme", "admin")
	var nonAdmin []string
	for _, sc := range auth.Scopes {
		if sc != auth.ScopeAdmin {
			nonAdmin = append(nonAdmin, string(sc))
		}
	}
	globex, _ := e.token(t, "globex", strings.Join(nonAdmin, ","))
	// lacking[sc] is an acme token with every scope but sc (and admin).
	lacking := map[auth.Scope]string{}
	for _, sc := range auth.Scopes {
		var others []string
		for _, o := range nonAdmin {
			if o != string(sc) {
				others = append(others, o)
			}
		}
		lacking[sc], _ = e.token(t, "acme", strings.Join(others, ","))
	}
	ids, conflicting := acmeObjects(t, e, acme)
	// A tenant's token proves its own entries (an attempt, an event) and
	// reads the checkpoint; another tenant's answers 404 (apiRefusals).
	for _, ref := range []string{ids["attempt"], ids["seq"]} {
		if r := e.call(t, globex, "GET", "/v1/evidence/proof/inclusion?entry="+ref, ""); r.code != http.StatusNotFound {
			t.Fatalf("globex proves acme's %s: %d %s", ref, r.code, r.body)
		}
		if r := e.call(t, lacking[auth.ScopeTasksRead], "GET", "/v1/evidence/proof/inclusion?entry="+ref, ""); r.code != http.StatusOK || !strings.Contains(r.body, `"checkpoint"`) {
			t.Fatalf("acme proves its %s: %d %s", ref, r.code, r.body)
		}
	}
	if r := e.call(t, lacking[auth.ScopeEvidenceRead], "GET", "/v1/evidence/checkpoint", ""); r.code != http.StatusOK || !strings.HasPrefix(r.body, "packrun.local/") {
		t.Fatalf("the checkpoint to a token without evidence:read: %d %s", r.code, r.body)
	}
	fill := func(s string) string {
		for k, v := range ids {
			s = strings.ReplaceAll(s, "{"+k+"}", v)
		}
		return s
	}

	// A second server, every token over its rate.
	limited := newRefusalEnv(t, HandlerOptions{RateLimit: 0.001})
	spent, _ := limited.token(t, "acme", "admin")
	if r := limited.call(t, spent, "GET", "/v1/packs", ""); r.code != http.StatusOK {
		t.Fatalf("within the burst: %d %s", r.code, r.body)
	}

	for _, rt := range routes {
		t.Run(rt, func(t *testing.T) {
			c := apiRefusals[rt]
			method, pattern, _ := strings.Cut(rt, " ")
			sample, body := samplePath(pattern), ""
			if method != "GET" && method != "DELETE" {
				body = "{}"
			}
			if publicRoutes[rt] {
				if r := e.call(t, "", method, sample, body); r.code != http.StatusOK {
					t.Errorf("no token: %d %s", r.code, r.body)
				}
				if r := limited.call(t, spent, method, sample, body); r.code != http.StatusOK {
					t.Errorf("over the rate: %d %s", r.code, r.body)
				}
			} else {
				errorEnvelope(t, "no token", e.call(t, "", method, sample, body), http.StatusUnauthorized, "unauthorized", "")
				errorEnvelope(t, "over the rate", limited.call(t, spent, method, sample, body), http.StatusTooManyRequests, "rate_limited", "")
			}
			errorEnvelope(t, "unknown query parameter", e.call(t, acme, method, sample+"?bogus=1", body), stBad, "invalid", "bogus")
			for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
				if !slices.Contains(served[pattern], m) {
					b := ""
					if m != "GET" && m != "DELETE" {
						b = "{}"
					}
					r := e.call(t, acme, m, sample, b)
					errorEnvelope(t, m+" not served", r, http.StatusMethodNotAllowed, "method_not_allowed", "")
					if r.header.Get("Allow") == "" {
						t.Errorf("%s %s: 405 without Allow", m, sample)
					}
					break
				}
			}
			if c.scope != "" {
				r := e.call(t, lacking[c.scope], method, sample, body)
				errorEnvelope(t, "without "+string(c.scope), r, stForbid, "forbidden", "")
				if !strings.Contains(r.body, string(c.scope)) {
					t.Errorf("without %s: %s does not name the scope", c.scope, r.body)
				}
			}
			for _, f := range c.r {
				path, b := fill(f.path), f.body
				if b == "{conflicting message}" {
					b = conflicting
				}
				tok := acme
				if f.asGlobex {
					tok = globex
				}
				r := e.call(t, tok, method, path, b)
				errorEnvelope(t, f.kind+" "+path, r, f.status, f.code, f.field)
				if f.sameAsMissing == "" {
					continue
				}
				miss := e.call(t, tok, method, f.sameAsMissing, b)
				id, missing := differ(path, f.sameAsMissing)
				if miss.code != r.code || strings.ReplaceAll(r.errMessage(), id, "X") != strings.ReplaceAll(miss.errMessage(), missing, "X") {
					t.Errorf("another tenant's %s: %d %s; a missing one: %d %s", path, r.code, r.body, miss.code, miss.body)
				}
				// Without the scope: refused before the lookup, the same
				// answer for what exists elsewhere and what does not.
				if c.scope != "" {
					a, m := e.call(t, lacking[c.scope], method, path, b), e.call(t, lacking[c.scope], method, f.sameAsMissing, b)
					if a.code != stForbid || a.body != m.body {
						t.Errorf("without %s: another tenant's %s: %d %s; a missing one: %d %s", c.scope, path, a.code, a.body, m.code, m.body)
					}
				}
			}
		})
	}
	e.noPanic(t)
	limited.noPanic(t)
}

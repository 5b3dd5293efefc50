package dispatch

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/host/schema"
)

// runEnvelope runs one task of testdata/modules/envelope.wasm (which
// answers with its payload as its response envelope) and returns the
// settled task.
func runEnvelope(t *testing.T, grants, response string, req *host.EvidenceRequirements) (env, *host.TaskRecord) {
	t.Helper()
	ctx := context.Background()
	e := newEnv(t, grants)
	e.d.cfg.Packs = onePack{packOf(t, "envelope.wasm", "local.envelope", `[{"typeId":"test.envelope","kind":"skill","taskTypes":["envelope"]}]`, grants)}
	if err := e.backend.SetPackTaskTypes(ctx, "local.envelope", []host.TaskTypeRoute{{TaskTypeSpec: host.TaskTypeSpec{TaskType: "envelope"}, Pack: "local.envelope", Node: "test.envelope"}}); err != nil {
		t.Fatal(err)
	}
	task, err := e.backend.Enqueue(ctx, host.TaskIntent{TaskType: "envelope", Source: "test", Payload: json.RawMessage(response), EvidenceRequirements: req},
		host.EnqueueOptions{MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := e.backend.Claim(ctx, "runner", time.Now())
	if err != nil || claimed.TaskID != task.TaskID {
		t.Fatalf("claim: %v %v", err, claimed)
	}
	e.d.RunTask(ctx, claimed)
	rec, err := e.backend.Task(ctx, task.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	return e, rec
}

const queueGrant = `,"grants":{"services":["queue"]}`

// A node's taskOutcome is the task's outcome: its summary, file changes
// and workflow signal are stored, its follow-ups enqueued and its
// external messages kept in the outbox, pending.
func TestTaskOutcomeFromGuest(t *testing.T) {
	ctx := context.Background()
	e, rec := runEnvelope(t, queueGrant, `{"outcome":"completed","output":{"n":1},"taskOutcome":{"operator_summary":"formatted 2 files",
		"file_changes":["src/a.go","src/b.go"],"workflow_signal":"verified","follow_up_tasks":[{"task_type":"notify","payload":{"to":"ops"}}],
		"external_messages":[{"channel":"ops","text":"done"}]}}`, nil)
	o := rec.Outcome
	if rec.Status != host.TaskCompleted || o.OperatorSummary != "formatted 2 files" || strings.Join(o.FileChanges, ",") != "src/a.go,src/b.go" ||
		o.WorkflowSignal != "verified" || len(o.FollowUpTasks) != 1 || len(o.ExternalMessage) != 1 {
		t.Fatalf("%s: %+v", rec.Status, o)
	}
	// The record and its outcome satisfy their published schemas.
	for id, v := range map[string]any{"agent-runtime/task.record/v1": rec, "agent-runtime/task.outcome/v1": rec.Outcome} {
		doc, _ := json.Marshal(v)
		if err := schema.Validate(id, doc); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
	}
	kids, err := e.backend.ListTasks(ctx, host.TaskFilter{TaskType: "notify"})
	if err != nil || len(kids) != 1 || kids[0].ParentTaskID != rec.TaskID || kids[0].Source != "task:"+rec.TaskID || string(kids[0].Payload) != `{"to":"ops"}` {
		t.Fatalf("follow-up: %v %+v", err, kids)
	}
	msgs, err := e.backend.Outbox(ctx, rec.TaskID)
	if err != nil || len(msgs) != 1 || msgs[0].Status != host.OutboxPending || string(msgs[0].Message) != `{"channel":"ops","text":"done"}` ||
		msgs[0].Tenant != host.DefaultTenant || msgs[0].AttemptID == "" {
		t.Fatalf("outbox: %v %+v", err, msgs)
	}
	evs, err := e.backend.Events(ctx, host.EventFilter{TaskID: rec.TaskID, Type: host.EventTaskAttemptFinished})
	if err != nil || len(evs) != 1 || !strings.Contains(string(evs[0].Data), `"external_messages":1`) || !strings.Contains(string(evs[0].Data), `"workflow_signal":"verified"`) {
		t.Fatalf("task_attempt_finished: %v %v", err, evs)
	}

	// Without a taskOutcome the summary stays "completed".
	_, rec = runEnvelope(t, "", `{"outcome":"completed","output":{}}`, nil)
	if rec.Status != host.TaskCompleted || rec.Outcome.OperatorSummary != "completed" {
		t.Fatalf("plain completion: %+v", rec.Outcome)
	}
}

// What the host refuses: an invalid taskOutcome fails the attempt with
// response_invalid_task_outcome; a follow-up that is no TaskIntent, or one
// from a pack without the queue grant, fails the task and applies nothing;
// unverified file changes keep it from completing when the task asks.
func TestTaskOutcomeRefused(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, grants, response string
		req                    *host.EvidenceRequirements
		status                 host.TaskStatus
		lastError              string
	}{
		{"invalid", queueGrant, `{"outcome":"completed","taskOutcome":{"file_changes":["/etc/passwd"]}}`, nil,
			host.TaskPermanentFailure, "response_invalid_task_outcome: response taskOutcome is invalid: taskOutcome.file_changes[0]: must be relative"},
		{"bad follow-up", queueGrant, `{"outcome":"completed","taskOutcome":{"follow_up_tasks":[{"task_type":"notify","payload":{},"colour":"red"}]}}`, nil,
			host.TaskPermanentFailure, "taskOutcome.follow_up_tasks[0]: task intent: colour: unknown field"},
		{"no queue grant", "", `{"outcome":"completed","taskOutcome":{"follow_up_tasks":[{"task_type":"notify","payload":{}}]}}`, nil,
			host.TaskPermanentFailure, "taskOutcome.follow_up_tasks: the pack is not granted the queue service"},
		{"unverified file change", queueGrant, `{"outcome":"completed","taskOutcome":{"file_changes":["src/a.go"],"external_messages":[{"a":1}]}}`,
			&host.EvidenceRequirements{RequireFileChangeVerification: true}, host.TaskPermanentFailure, "missing evidence: file change src/a.go"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e, rec := runEnvelope(t, c.grants, c.response, c.req)
			if rec.Status != c.status || !strings.Contains(rec.LastError, c.lastError) {
				t.Fatalf("%s (%s), want %s (%s)", rec.Status, rec.LastError, c.status, c.lastError)
			}
			if kids, _ := e.backend.ListTasks(ctx, host.TaskFilter{TaskType: "notify"}); len(kids) != 0 {
				t.Fatalf("follow-ups applied: %+v", kids)
			}
			if msgs, _ := e.backend.Outbox(ctx, rec.TaskID); len(msgs) != 0 {
				t.Fatalf("outbox of a task that did not complete: %+v", msgs)
			}
		})
	}
	// A refused taskOutcome is the attempt's own failure, produced by the
	// runtime (so a replay of the attempt reproduces it).
	e, rec := runEnvelope(t, queueGrant, `{"outcome":"completed","taskOutcome":{"operator_summary":1}}`, nil)
	atts, err := e.backend.ListAttempts(ctx, host.AttemptFilter{TaskID: rec.TaskID})
	if err != nil || len(atts) != 1 || atts[0].Outcome != abi.Failed || atts[0].Error.Code != abi.CodeResponseTaskOutcome {
		t.Fatalf("attempt: %v %+v", err, atts)
	}
}

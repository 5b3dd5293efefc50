package sqlite

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
)

// settle runs one attempt of the next task with the given attempt outcome
// and machine status.
func settle(t *testing.T, f *fixture, outcome abi.Outcome, ms host.MachineStatus) *host.TaskRecord {
	t.Helper()
	task := mustClaim(t, f.Store, f.clock.Now())
	a := &host.Attempt{TaskID: task.TaskID, Pack: "local.test@1.0.0", ModuleSHA256: "ab12", Node: "test.node",
		Attempt: task.AttemptCount, ABIVersion: "1.0", Input: task.Payload, Outcome: outcome}
	if outcome == abi.Suspended {
		a.Interrupt = json.RawMessage(`{"question":"approve?"}`)
	}
	rec, err := f.Finish(ctx, task.TaskID, host.FinishInput{Record: a, Claimed: task, Outcome: host.TaskOutcome{MachineStatus: ms}})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestResume(t *testing.T) {
	f := newFixture(t, Options{})
	task := mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{MaxAttempts: 1})
	_, err := f.Resume(ctx, task.TaskID, json.RawMessage(`1`), "cli:ada")
	wantErr(t, err, host.ErrConflict) // pending
	if rec := settle(t, f, abi.Suspended, host.MachineBlocked); rec.Status != host.TaskBlocked {
		t.Fatalf("suspended: %s", rec.Status)
	}
	for _, bad := range []string{``, `{`, `nul`} {
		_, err := f.Resume(ctx, task.TaskID, json.RawMessage(bad), "cli:ada")
		wantErr(t, err, host.ErrValidation)
		if he := (*host.Error)(nil); !errors.As(err, &he) || he.Field != "value" {
			t.Fatalf("%q: %v", bad, err)
		}
	}
	rec, err := f.Resume(ctx, task.TaskID, json.RawMessage(` {"ok": true} `), "cli:ada")
	if err != nil {
		t.Fatal(err)
	}
	// The one attempt was used: resuming allows one more.
	if rec.Status != host.TaskPending || rec.MaxAttempts != 2 || rec.FinishedAt != nil || !reflect.DeepEqual(rec.ResumeValues, []json.RawMessage{json.RawMessage(`{"ok":true}`)}) {
		t.Fatalf("resumed: %+v", rec)
	}
	_, err = f.Resume(ctx, task.TaskID, json.RawMessage(`2`), "cli:ada")
	wantErr(t, err, host.ErrConflict) // pending again
	claimed := mustClaim(t, f.Store, f.clock.Now())
	if !reflect.DeepEqual(claimed.ResumeValues, rec.ResumeValues) {
		t.Fatalf("claimed without its resume values: %+v", claimed)
	}
	// Suspended again: a second value is appended after the first.
	a := &host.Attempt{TaskID: claimed.TaskID, Pack: "p@1", ModuleSHA256: "ab", Node: "n", Attempt: claimed.AttemptCount, ABIVersion: "1.0",
		Input: claimed.Payload, Outcome: abi.Suspended, Interrupt: json.RawMessage(`{}`)}
	if _, err := f.Finish(ctx, claimed.TaskID, host.FinishInput{Record: a, Outcome: host.TaskOutcome{MachineStatus: host.MachineBlocked}}); err != nil {
		t.Fatal(err)
	}
	rec, err = f.Resume(ctx, task.TaskID, json.RawMessage(`null`), "token:tok_1 (ops)")
	if err != nil || len(rec.ResumeValues) != 2 || string(rec.ResumeValues[1]) != "null" || rec.MaxAttempts != 3 {
		t.Fatalf("second resume: %v %+v", err, rec)
	}
	evs, err := f.Events(ctx, host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskResumed})
	if err != nil || len(evs) != 2 {
		t.Fatalf("task_resumed events: %v %v", err, evs)
	}
	if got := string(evs[0].Data); got != `{"by":"cli:ada","max_attempts":2,"resume_values":1,"value":{"ok":true}}` {
		t.Fatalf("task_resumed %s", got)
	}

	// Blocked by a machine status, not a suspension: resume refuses and
	// says to retry.
	mustClaim(t, f.Store, f.clock.Now())
	other := mustEnqueue(t, f.Store, intent("demo", host.Priority(1)), host.EnqueueOptions{})
	if rec := settle(t, f, abi.Completed, host.MachineBlocked); rec.TaskID != other.TaskID || rec.Status != host.TaskBlocked {
		t.Fatalf("blocked: %+v", rec)
	}
	_, err = f.Resume(ctx, other.TaskID, json.RawMessage(`1`), "cli:ada")
	wantErr(t, err, host.ErrConflict)
	if !strings.Contains(err.Error(), "retry it instead") {
		t.Fatalf("refusal: %v", err)
	}
	if rep, err := f.VerifyChain(ctx); err != nil || !rep.OK {
		t.Fatalf("chain: %v %+v", err, rep)
	}
}

func TestResumeLimits(t *testing.T) {
	f := newFixture(t, Options{})
	task := mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{MaxAttempts: host.MaxMaxAttempts})
	big := json.RawMessage(`"` + strings.Repeat("x", host.MaxResumeBytes/2) + `"`)
	for i := 0; ; i++ {
		settle(t, f, abi.Suspended, host.MachineBlocked)
		_, err := f.Resume(ctx, task.TaskID, big, "cli:ada")
		if i == 0 && err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			wantErr(t, err, host.ErrValidation)
			break
		}
	}
	rec, err := f.Task(ctx, task.TaskID)
	if err != nil || rec.Status != host.TaskBlocked || len(rec.ResumeValues) != 1 {
		t.Fatalf("a refused resume changed the task: %v %+v", err, rec)
	}
}

func TestRetry(t *testing.T) {
	f := newFixture(t, Options{})
	task := mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{MaxAttempts: 1})
	_, err := f.Retry(ctx, task.TaskID, "cli:ada")
	wantErr(t, err, host.ErrConflict) // pending
	if rec := settle(t, f, abi.Failed, host.MachineNeedsRetry); rec.Status != host.TaskPermanentFailure {
		t.Fatalf("no attempts left: %s", rec.Status)
	}
	rec, err := f.Retry(ctx, task.TaskID, "cli:ada")
	if err != nil || rec.Status != host.TaskPending || rec.MaxAttempts != 2 || rec.AttemptCount != 1 || rec.FinishedAt != nil {
		t.Fatalf("retried: %v %+v", err, rec)
	}
	if rec := settle(t, f, abi.Completed, host.MachineOK); rec.Status != host.TaskCompleted {
		t.Fatalf("retried attempt: %s %s", rec.Status, rec.LastError)
	}
	_, err = f.Retry(ctx, task.TaskID, "cli:ada")
	wantErr(t, err, host.ErrConflict) // completed
	evs, err := f.Events(ctx, host.EventFilter{TaskID: task.TaskID, Type: host.EventTaskRetryRequested})
	if err != nil || len(evs) != 1 || string(evs[0].Data) != `{"by":"cli:ada","from":"permanent_failure","max_attempts":2}` {
		t.Fatalf("task_retry_requested: %v %v", err, evs)
	}
	_, err = f.Retry(ctx, "task_nope", "cli:ada")
	wantErr(t, err, host.ErrNotFound)
}

// Finish keeps a completed outcome's external messages in the outbox and
// refuses malformed ones as the caller's mistake, changing nothing.
func TestFinishOutbox(t *testing.T) {
	f := newFixture(t, Options{})
	mustEnqueue(t, f.Store, intent("demo", nil), host.EnqueueOptions{Tenant: "acme"})
	task := mustClaim(t, f.Store, f.clock.Now())
	a := attemptFor(t, f.Store, task)
	for _, msgs := range [][]json.RawMessage{{json.RawMessage(`[]`)}, {json.RawMessage(`null`)}, make([]json.RawMessage, host.MaxExternalMessages+1)} {
		out := okOutcome()
		out.ExternalMessage = msgs
		_, err := f.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: out})
		if he := (*host.Error)(nil); !errors.As(err, &he) || he.Field != "outcome.external_messages" {
			t.Fatalf("%d messages: %v", len(msgs), err)
		}
	}
	out := okOutcome()
	out.ExternalMessage = []json.RawMessage{json.RawMessage(`{"to": "ops"}`), json.RawMessage(`{"n":2}`)}
	rec, err := f.Finish(ctx, task.TaskID, host.FinishInput{AttemptID: a.AttemptID, Outcome: out})
	if err != nil || rec.Status != host.TaskCompleted {
		t.Fatalf("%v %+v", err, rec)
	}
	msgs, err := f.Outbox(ctx, task.TaskID)
	if err != nil || len(msgs) != 2 || string(msgs[0].Message) != `{"to":"ops"}` || msgs[1].Tenant != "acme" || msgs[0].Status != host.OutboxPending {
		t.Fatalf("outbox: %v %+v", err, msgs)
	}
}

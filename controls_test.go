package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/auth"
)

// interrupter is testdata/hostile/interrupt.wasm as a pack serving task
// type approve: it suspends with {"question":"approve?"} and, resumed with
// V, completes with {"resumed":V}.
func interrupter() packSpec {
	return packSpec{name: "local.hostile.interrupt", version: "1.0.0", module: "testdata/hostile/interrupt.wasm",
		nodes: `[{"typeId":"hostile.interrupt","kind":"skill","taskTypes":["approve"]}]`}
}

// A task its node suspended is resumed from the console with a value: its
// next attempt gets the value from openwop_interrupt and completes, and
// that attempt replays identically. Retry re-runs a blocked task as it was.
func TestResumeSuspendedTask(t *testing.T) {
	f := newFixture(t)
	f.install(t, interrupter())
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(rctx) }()
	defer func() { cancel(); <-done }()

	task, err := f.Enqueue(ctx, host.TaskIntent{TaskType: "approve", Source: "test", Payload: json.RawMessage(`{}`)}, host.EnqueueOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f, task.TaskID, host.TaskBlocked)
	cb := consoleBackend{f.Host}
	if _, err := cb.ResumeTask(ctx, "globex", task.TaskID, json.RawMessage(`1`)); !errors.Is(err, host.ErrNotFound) {
		t.Fatalf("another tenant's resume: %v", err)
	}
	// Retry runs it again as it was: it suspends again.
	if _, err := cb.RetryTask(ctx, host.DefaultTenant, task.TaskID); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f, task.TaskID, host.TaskBlocked)
	octx := auth.With(ctx, &auth.Principal{TokenID: "tok_1", Name: "ops", Tenant: host.DefaultTenant})
	if _, err := cb.ResumeTask(octx, host.DefaultTenant, task.TaskID, json.RawMessage(`{"approved":true}`)); err != nil {
		t.Fatal(err)
	}
	rec := waitStatus(t, f, task.TaskID, host.TaskCompleted)
	if rec.AttemptCount != 3 || len(rec.ResumeValues) != 1 {
		t.Fatalf("completed: %+v", rec)
	}
	atts, err := f.Store().ListAttempts(ctx, host.AttemptFilter{TaskID: task.TaskID, Limit: 1})
	if err != nil || len(atts) != 1 || string(atts[0].Output) != `{"resumed":{"approved":true}}` {
		t.Fatalf("the resumed attempt: %v %+v", err, atts)
	}
	v, err := f.Replay(ctx, atts[0].AttemptID, ReplayOptions{})
	if err != nil || !v.Identical {
		t.Fatalf("replay of the resumed attempt: %v %+v", err, v)
	}
	evs, err := f.Store().Events(ctx, host.EventFilter{TaskID: task.TaskID})
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]string{}
	for _, e := range evs {
		var d struct{ By string }
		json.Unmarshal(e.Data, &d)
		if d.By != "" {
			by[e.Type] = d.By
		}
	}
	if by[host.EventTaskResumed] != "console:tok_1 (ops)" || by[host.EventTaskRetryRequested] != "console" {
		t.Fatalf("who asked: %v", by)
	}
}

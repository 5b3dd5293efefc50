package api

import (
	"context"
	"net/http"
	"testing"

	"github.com/packrun/packrun/host"
)

// TestEnqueueThroughConfig: POST /v1/tasks makes one call, Config.Enqueue
// (Host.Enqueue), carrying the call's api_call event for that same write;
// a refusal there is the answer and nothing else is written.
func TestEnqueueThroughConfig(t *testing.T) {
	backend := newBackend(t)
	var calls int
	var audit *host.Audit
	refuse := false
	e := newEnv(t, backend, func(c *Config) {
		c.Enqueue = func(ctx context.Context, in host.TaskIntent, opts host.EnqueueOptions) (*host.TaskRecord, error) {
			calls++
			audit = host.AuditOf(ctx)
			if refuse {
				return nil, host.Invalid("task intent", "payload.name", "refused by the host")
			}
			return backend.Enqueue(ctx, in, opts)
		}
	})
	rec := e.enqueue(helloIntent)
	if calls != 1 || audit == nil || audit.Type != EventAPICall || audit.Of != host.AuditTask {
		t.Fatalf("Enqueue called %d times with audit %+v; want once, carrying the api_call", calls, audit)
	}
	evs, err := backend.Events(context.Background(), host.EventFilter{Type: EventAPICall, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].TaskID != rec.TaskID {
		t.Fatalf("api_call events %+v; want one, on task %s", evs, rec.TaskID)
	}

	refuse = true
	wantError(t, e.post("/v1/tasks", helloIntent), http.StatusBadRequest, CodeInvalid, "payload.name")
	if calls != 2 {
		t.Fatalf("Enqueue called %d times, want 2", calls)
	}
	if ts := e.listTasks(""); len(ts) != 1 {
		t.Fatalf("%d tasks after a refusal, want 1", len(ts))
	}
	evs, _ = backend.Events(context.Background(), host.EventFilter{Type: EventAPICall, Limit: 10})
	if len(evs) != 1 {
		t.Fatalf("%d api_call events after a refusal, want 1", len(evs))
	}
}

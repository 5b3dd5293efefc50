package packrun

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packrun/packrun/host"
)

// commitCounter is an Observer counting the store's group commits.
type commitCounter struct{ n atomic.Int64 }

func (*commitCounter) AttemptDone(host.AttemptStats)     {}
func (*commitCounter) TaskStarted(host.TaskStats)        {}
func (*commitCounter) TaskFinished(host.TaskStats)       {}
func (*commitCounter) DispatchLock(bool)                 {}
func (c *commitCounter) WriterCommit(int, time.Duration) { c.n.Add(1) }

// Issue 30: a state-changing API call on the hot path — POST /v1/invoke,
// POST /v1/tasks — costs one durable commit, its api_call event written in
// the same transaction as the change it audits. On ccac50d each was two
// commits in a row (the change, then the event), and a crash between them
// left a change with no record of who made it. Here the event is the
// entry right after the change's in the chain, and the request commits
// once.
func TestAPICallAuditSharesItsChangesCommit(t *testing.T) {
	obs := &commitCounter{}
	e := newConfigEnv(t, Config{Observer: obs}, false)
	h := e.Host
	tok, rec := e.token(t, "acme", "invoke,tasks:write")
	e.call(t, tok, "POST", "/v1/invoke", `{"pack":"local.hello.c","input":{"name":"warm"}}`) // token first used: its last-use write

	for _, c := range []struct{ path, body, what string }{
		{"/v1/invoke", `{"pack":"local.hello.c","input":{"name":"a"}}`, "attempt"},
		{"/v1/tasks", `{"task_type":"hello.c","payload":{"name":"b"}}`, "task"},
	} {
		// The evidence log's sequencer commits once for the entries the
		// request appended (in the background, or in LogSync if it has
		// not yet): settle it before and count it after.
		if _, err := h.EvidenceLog().LogSync(ctx); err != nil {
			t.Fatal(err)
		}
		before := obs.n.Load()
		r := e.call(t, tok, "POST", c.path, c.body)
		if r.code != http.StatusOK && r.code != http.StatusCreated {
			t.Fatalf("%s: %d %s", c.path, r.code, r.body)
		}
		if _, err := h.EvidenceLog().LogSync(ctx); err != nil {
			t.Fatal(err)
		}
		if got := obs.n.Load() - before; got != 2 {
			t.Errorf("POST %s: %d commits, want 2 (the request's, and the log's integrating it)", c.path, got)
		}
		evs, err := h.Store().Events(ctx, host.EventFilter{AfterSeq: 0, Limit: 10000})
		if err != nil {
			t.Fatal(err)
		}
		last, prev := evs[len(evs)-1], evs[len(evs)-2]
		if last.Type != "api_call" || !strings.Contains(string(last.Data), rec.ID) || !strings.Contains(string(last.Data), `"route":"POST `+c.path) {
			t.Fatalf("POST %s: the newest event is %s %s, not its api_call", c.path, last.Type, last.Data)
		}
		switch c.what {
		case "attempt":
			if prev.Type != host.EventAttemptRecorded || last.AttemptID == "" || last.AttemptID != prev.AttemptID || last.Seq != prev.Seq+1 {
				t.Errorf("invoke: api_call %+v does not follow its attempt %+v", last, prev)
			}
		case "task":
			if prev.Type != host.EventTaskEnqueued || last.TaskID == "" || last.TaskID != prev.TaskID || last.Seq != prev.Seq+1 {
				t.Errorf("enqueue: api_call %+v does not follow its task %+v", last, prev)
			}
		}
	}
	// Exactly one api_call per call: the API did not append another.
	evs, _ := h.Store().Events(ctx, host.EventFilter{Type: "api_call", Limit: 100})
	if len(evs) != 3 {
		t.Fatalf("%d api_call events, want 3", len(evs))
	}
}

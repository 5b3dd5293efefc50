package runs

import (
	"encoding/json"
	"testing"

	"github.com/packrun/packrun/host"
)

// TestProgressOf: what a run's event log says it has done, and the node
// to continue with.
func TestProgressOf(t *testing.T) {
	w := &host.OpenwopWorkflow{Nodes: []host.OpenwopNode{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
	evs := []host.RunEvent{
		runEvent(host.RunEventStarted, "", nil),
		runEvent(host.RunEventNodeStarted, "a", nil),
		runEvent(host.RunEventNodeDone, "a", map[string]any{"output": map[string]int{"x": 1}}),
		runEvent(host.RunEventNodeStarted, "b", nil),
		runEvent(host.RunEventNodeStarted, "b", nil),
	}
	p := progressOf(evs)
	if string(p.outputs["a"]) != `{"x":1}` || p.started["b"] != 2 || p.ended != "" {
		t.Fatalf("progress %+v", p)
	}
	if n := nextNode(w, p); n.ID != "b" {
		t.Fatalf("next node %q, want b", n.ID)
	}
	p = progressOf(append(evs, runEvent(host.RunEventNodeSuspend, "b", nil)))
	if p.ended != "b" || p.endedType != host.RunEventNodeSuspend {
		t.Fatalf("ended %q %q", p.ended, p.endedType)
	}
	p.outputs["b"], p.outputs["c"] = json.RawMessage(`1`), json.RawMessage(`2`)
	if n := nextNode(w, p); n.ID != "" {
		t.Fatalf("next node %q after all completed, want none", n.ID)
	}
}

// TestFixturesAreBuiltin: a fixture's id cannot be taken by a tenant's
// workflow (PutOpenwopWorkflow refuses it before the store is asked).
func TestFixturesAreBuiltin(t *testing.T) {
	s := New(Config{})
	for _, f := range openwopFixtures {
		err := s.PutOpenwopWorkflow(t.Context(), &host.OpenwopWorkflow{WorkflowID: f.WorkflowID})
		if err == nil {
			t.Fatalf("put %s: accepted", f.WorkflowID)
		}
	}
}

// TestExecutions: the recursion limit counts every attempt started, a
// node run again (after its interrupt was resolved, or a restart)
// included.
func TestExecutions(t *testing.T) {
	p := progressOf([]host.RunEvent{
		runEvent(host.RunEventNodeStarted, "a", nil), runEvent(host.RunEventNodeStarted, "a", nil), runEvent(host.RunEventNodeStarted, "b", nil),
	})
	if n := p.executions(); n != 3 {
		t.Fatalf("%d executions, want 3", n)
	}
	if n := progressOf(nil).executions(); n != 0 {
		t.Fatalf("%d executions of no history, want 0", n)
	}
}

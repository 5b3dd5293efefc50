package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packrun/packrun/host"
)

// The workflows commands: add (refusals name the field, store nothing),
// list, show, start (twice: the same record), records, record, cancel.
func TestWorkflowsCommands(t *testing.T) {
	h := exampleHome(t, "goal-loop")
	if out := h.ok("workflows", "list"); !strings.Contains(out, "goal-loop") || !strings.Contains(out, "plan") {
		t.Fatalf("list:\n%s", out)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","transitions":[{"signal":"s","next_state":"b"}]}]}`), 0o644)
	code, _, errs := h.run("workflows", "add", bad)
	if first, _, _ := strings.Cut(errs, "\n"); code != exitUsage || !strings.Contains(first, "states[0].transitions[0].next_state") {
		t.Fatalf("bad: exit %d %q", code, errs)
	}
	if code, _, _ := h.run("workflows", "show", "w"); code != exitNotFound {
		t.Fatalf("a refused definition was stored: exit %d", code)
	}
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"workflow_type":"w","initial_state":"a","states":[{"state_id":"a","completion_signals":["done"]}]}`), 0o644)
	if out := h.ok("workflows", "add", good); !strings.Contains(out, "added workflow w (1 states)") {
		t.Fatalf("add: %s", out)
	}
	var def host.WorkflowDefinition
	if err := json.Unmarshal([]byte(h.ok("workflows", "show", "goal-loop")), &def); err != nil || def.InitialState != "plan" {
		t.Fatalf("show: %+v %v", def, err)
	}

	if code, _, errs := h.run("workflows", "start", "goal-loop"); code != exitUsage || !strings.Contains(errs, "--key") {
		t.Fatalf("no --key: exit %d %q", code, errs)
	}
	if code, _, errs := h.run("workflows", "start", "goal-loop", "--key", "k", "--context", "[1]"); code != exitUsage || !strings.Contains(errs, "context") {
		t.Fatalf("bad context: exit %d %q", code, errs)
	}
	if code, _, _ := h.run("workflows", "start", "nope", "--key", "k"); code != exitNotFound {
		t.Fatalf("unknown workflow: exit %d", code)
	}
	out := h.ok("workflows", "start", "goal-loop", "--key", "k", "--context", `{"goal":"g"}`)
	id, _, _ := strings.Cut(out, " ")
	if !strings.Contains(out, "started: active in state plan") {
		t.Fatalf("start: %s", out)
	}
	if again := h.ok("workflows", "start", "goal-loop", "--key", "k"); !strings.HasPrefix(again, id+" exists") {
		t.Fatalf("again: %s", again)
	}
	var recs []host.WorkflowRecord
	if err := json.Unmarshal([]byte(h.ok("workflows", "records", "--type", "goal-loop", "--json")), &recs); err != nil || len(recs) != 1 || recs[0].WorkflowID != id {
		t.Fatalf("records: %+v %v", recs, err)
	}
	if out := h.ok("workflows", "records", "--type", "w", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("records of w: %s", out)
	}
	if out := h.ok("workflows", "records"); !strings.Contains(out, id) || !strings.Contains(out, "active") {
		t.Fatalf("records:\n%s", out)
	}
	// Its plan task waits in the queue, tied to the record.
	if out := h.ok("tasks", "list", "--json"); !strings.Contains(out, `"workflow_id":"`+id+`"`) || !strings.Contains(out, "goal.plan") {
		t.Fatalf("tasks: %s", out)
	}
	if out := h.ok("workflows", "cancel", id); !strings.Contains(out, "canceled in state plan") {
		t.Fatalf("cancel: %s", out)
	}
	var rec host.WorkflowRecord
	if err := json.Unmarshal([]byte(h.ok("workflows", "record", id)), &rec); err != nil || rec.Status != host.WorkflowCanceled {
		t.Fatalf("record: %+v %v", rec, err)
	}
	if code, _, _ := h.run("workflows", "cancel", id); code == 0 {
		t.Fatal("a canceled record canceled again")
	}
	if code, _, _ := h.run("workflows", "record", "wf_nope"); code != exitNotFound {
		t.Fatalf("record wf_nope: exit %d", code)
	}
}

package host

import (
	"errors"
	"os"
	"testing"
)

const goodWorkflowRecord = `{"workflow_id":"wf_1","workflow_type":"goal-loop","instance_key":"k","current_state":"plan","context":{"goal":"g"},
	"status":"canceled","created_at":"2026-03-01T12:00:00Z","updated_at":"2026-03-01T12:00:00Z","completed_at":null,"tenant":"default"}`

// The shipped goal-loop decodes; a record (canceled is packrun's fourth
// status) decodes, and a broken one is refused naming the path.
func TestDecodeWorkflows(t *testing.T) {
	b, err := os.ReadFile("../examples/goal-loop/workflow.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := DecodeWorkflowDefinition(b)
	if err != nil || d.WorkflowType != GoalLoop || d.State("verify").Next("rejected") != "execute" || !d.State("verify").Completes("verified") {
		t.Fatalf("goal-loop: %+v %v", d, err)
	}
	r, err := DecodeWorkflowRecord([]byte(goodWorkflowRecord))
	if err != nil || r.Status != WorkflowCanceled || r.Tenant != DefaultTenant {
		t.Fatalf("record: %+v %v", r, err)
	}
	var he *Error
	for doc, field := range map[string]string{
		`{"workflow_id":"wf_1"}`: "workflow_type",
		goodWorkflowRecord[:len(goodWorkflowRecord)-1] + `,"extra":1}`: "extra",
	} {
		if _, err := DecodeWorkflowRecord([]byte(doc)); !errors.As(err, &he) || he.Field != field {
			t.Errorf("%.60s: %v, want field %s", doc, err, field)
		}
	}
}

func FuzzDecodeWorkflowDefinition(f *testing.F) {
	b, _ := os.ReadFile("../examples/goal-loop/workflow.json")
	f.Add(b)
	f.Add([]byte(goodWorkflowRecord))
	f.Fuzz(func(t *testing.T, b []byte) {
		if d, err := DecodeWorkflowDefinition(b); err == nil {
			if d.State(d.InitialState) == nil {
				t.Fatalf("accepted %+v", d)
			}
			for _, s := range d.States {
				for _, tr := range s.Transitions {
					if d.State(tr.NextState) == nil {
						t.Fatalf("accepted a transition to nowhere: %+v", d)
					}
				}
			}
		}
		DecodeWorkflowRecord(b)
	})
}

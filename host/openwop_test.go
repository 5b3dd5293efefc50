package host

import (
	"encoding/json"
	"testing"
)

// FuzzOpenwopWorkflow: any bytes decode and validate without panicking,
// and a definition that validates has what a run needs.
func FuzzOpenwopWorkflow(f *testing.F) {
	f.Add([]byte(`{"workflowId":"wf","nodes":[{"id":"a","typeId":"vendor.x.y.greet"}]}`))
	f.Add([]byte(`{"workflowId":"","nodes":[]}`))
	f.Add([]byte(`{"workflowId":"wf","nodes":[{"id":"a","typeId":"t"},{"id":"a","typeId":"t"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var w OpenwopWorkflow
		if json.Unmarshal(b, &w) != nil {
			return
		}
		if ValidateOpenwopWorkflow("fuzz", &w) != nil {
			return
		}
		seen := map[string]bool{}
		for _, n := range w.Nodes {
			if n.ID == "" || n.TypeID == "" || seen[n.ID] {
				t.Fatalf("validated %q", b)
			}
			seen[n.ID] = true
		}
	})
}

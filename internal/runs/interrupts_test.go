package runs

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/packrun/packrun/host"
)

// interruptOf reads what a node suspended with: the guest's bytes. Whatever
// they are, the interrupt has one of openwop's kinds, a bounded key, and,
// of kind approval, only actions packrun serves (at least one).
func FuzzInterruptOf(f *testing.F) {
	for _, s := range []string{
		`{"question":"approve?"}`,
		`{"kind":"approval","key":"k1","data":{"actions":["accept","reject","ask","edit"]}}`,
		`{"kind":"approval","data":{"actions":[]}}`,
		`{"kind":"clarification","key":"","data":{"questions":[]}}`,
		`{"kind":"nope"}`, `[]`, `null`, `"x"`, `{"kind":1}`, `{"data":{"actions":"accept"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		in := interruptOf(json.RawMessage(b), "run_1", "gate", 2)
		if !slices.Contains(interruptKinds, in.Kind) || in.Key == "" || len(in.Key) > 256 || in.NodeID != "gate" {
			t.Fatalf("%q: %+v", b, in)
		}
		if in.Kind == "approval" {
			if len(in.Actions) == 0 {
				t.Fatalf("%q: an approval offering no action", b)
			}
			for _, a := range in.Actions {
				if !slices.Contains(approvalActions, a) {
					t.Fatalf("%q: action %q", b, a)
				}
			}
		} else if in.Actions != nil {
			t.Fatalf("%q: actions %v on kind %s", b, in.Actions, in.Kind)
		}
	})
}

func TestInterruptOf(t *testing.T) {
	for _, c := range []struct {
		payload, kind, key string
		actions            []string
	}{
		{`{"question":"approve?"}`, "custom", "run_1:gate:2", nil},
		{`{"kind":"approval","key":"k1","data":{"actions":["reject","ask","reject","edit-accept"]}}`, "approval", "k1", []string{"reject", "edit-accept"}},
		{`{"kind":"approval"}`, "approval", "run_1:gate:2", []string{"accept", "reject"}},
		{`{"kind":"external-event","key":"e"}`, "external-event", "e", nil},
		{`not json`, "custom", "run_1:gate:2", nil},
	} {
		in := interruptOf(json.RawMessage(c.payload), "run_1", "gate", 2)
		if in.Kind != c.kind || in.Key != c.key || !slices.Equal(in.Actions, c.actions) {
			t.Errorf("%s: %+v, want %s %s %v", c.payload, in, c.kind, c.key, c.actions)
		}
	}
}

// TestProgressOfResolution: a resolution of a node's interrupt undoes its
// suspension's end and hands the node its resumeValues, oldest first.
func TestProgressOfResolution(t *testing.T) {
	evs := []host.RunEvent{
		runEvent(host.RunEventStarted, "", nil),
		runEvent(host.RunEventNodeStarted, "gate", nil),
		runEvent(host.RunEventNodeSuspend, "gate", nil),
		runEvent(host.RunEventInterruptRequested, "gate", map[string]any{"nodeId": "gate", "kind": "custom"}),
		runEvent(host.RunEventInterruptResolved, "gate", map[string]any{"resumeValue": 1}),
		runEvent(host.RunEventNodeStarted, "gate", nil),
		runEvent(host.RunEventNodeSuspend, "gate", nil),
		runEvent(host.RunEventInterruptRequested, "gate", map[string]any{"nodeId": "gate", "kind": "approval"}),
	}
	p := progressOf(evs)
	if p.ended != "gate" || len(p.resume["gate"]) != 1 || string(p.resume["gate"][0]) != "1" {
		t.Fatalf("waiting again: %+v", p)
	}
	if in := pendingInterrupt(evs); in == nil || in.NodeID != "gate" || in.Kind != "approval" {
		t.Fatalf("pending %+v", in)
	}
	evs = append(evs, runEvent(host.RunEventApprovalReceived, "gate", map[string]any{"resumeValue": map[string]string{"action": "accept"}}))
	p = progressOf(evs)
	if p.ended != "" || len(p.resume["gate"]) != 2 || string(p.resume["gate"][1]) != `{"action":"accept"}` || p.started["gate"] != 2 {
		t.Fatalf("resolved again: %+v", p)
	}
	if in := pendingInterrupt(evs); in != nil {
		t.Fatalf("pending after its resolution: %+v", in)
	}
}

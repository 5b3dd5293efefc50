package packrun

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/dispatch"
)

// helloSchemas is examples/hello-wat with an inputSchema requiring a string
// name and the given outputSchema.
func helloSchemas(version, output string) packSpec {
	return packSpec{name: "local.hello.wat", version: version, module: "examples/hello-wat/hello.wasm",
		nodes: `[{"typeId":"example.hello","kind":"skill","taskTypes":["hello.wat"],
			"inputSchema":{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}},
			"outputSchema":` + output + `}]`}
}

// Attempts refused by a node's schemas are recorded, and replay verifies
// them: the refused input without running anything, the refused output
// by running the module and applying the schema again.
func TestSchemaRefusalsReplayIdentical(t *testing.T) {
	f := newFixture(t)
	f.install(t, helloSchemas("1.0.0", `{"type":"object","properties":{"greeting":{"pattern":"^Hi"}}}`))
	_, err := f.Invoke(ctx, "local.hello.wat", InvokeRequest{Input: json.RawMessage(`{"name":1}`)})
	ie, ok := errors.AsType[*dispatch.InputError](err)
	if !ok || !errors.Is(err, ErrInputRefused) || ie.Path != "name" {
		t.Fatalf("invoke: %v", err)
	}
	inv, err := f.Invoke(ctx, "local.hello.wat", InvokeRequest{Input: json.RawMessage(`{"name":"x"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if inv.Attempt.Outcome != abi.Failed || inv.Attempt.Error.Code != dispatch.CodeOutputSchema {
		t.Fatalf("output: %s %+v", inv.Attempt.Outcome, inv.Attempt.Error)
	}
	for _, id := range []string{ie.AttemptID, inv.Attempt.AttemptID} {
		v, err := f.Replay(ctx, id, ReplayOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !v.Identical {
			t.Fatalf("replay of %s: %+v", id, v)
		}
	}
}

package examples

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/testing/hosttest"
	"github.com/packrun/packrun/runtime"
)

// goal-loop's module is rebuilt byte for byte from goal.wat, pack.json
// pins it, and each node completes with the workflow signal of its state.
func TestGoalLoopExample(t *testing.T) {
	hosttest.CheckReproducible(t, "goal-loop/goal.wasm", "run goal-loop/build.sh and update pack.json's sha256", func(out string) error {
		return hosttest.Run(exec.Command("bash", "goal-loop/build.sh", out))
	})
	wasm, err := os.ReadFile("goal-loop/goal.wasm")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Runtime struct {
			Modules []struct{ SHA256 string } `json:"modules"`
		} `json:"runtime"`
	}
	if err := json.Unmarshal(must(os.ReadFile("goal-loop/pack.json")), &m); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(wasm); len(m.Runtime.Modules) != 1 || m.Runtime.Modules[0].SHA256 != hex.EncodeToString(sum[:]) {
		t.Fatalf("pack.json does not pin goal.wasm: %+v", m.Runtime.Modules)
	}
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	mod, err := rt.Load(ctx, wasm, runtime.LoadOptions{Name: "goal-loop"})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close(ctx)
	if info := mod.Info(); info.PackName != "local.goal-loop.wat" || len(info.Nodes) != 3 {
		t.Fatalf("info %+v", info)
	}
	for node, signal := range map[string]string{"goal.plan": "planned", "goal.execute": "executed", "goal.verify": "verified"} {
		res, err := mod.Invoke(ctx, runtime.Invocation{Node: node, Input: json.RawMessage(`{"goal":"g"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Outcome != abi.Completed || res.TaskOutcome == nil || res.TaskOutcome.WorkflowSignal != signal {
			t.Errorf("%s: %s %s %+v", node, res.Outcome, res.Output, res.TaskOutcome)
		}
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

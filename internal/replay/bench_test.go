package replay

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/packrun/packrun/runtime"
)

// BenchmarkOriginalVsReplay: the C hello node invoked live, then replayed
// from its recorded trace; both on fresh instances from the pool.
func BenchmarkOriginalVsReplay(b *testing.B) {
	ctx := context.Background()
	wasm, err := os.ReadFile("../../examples/hello-c/hello.wasm")
	if err != nil {
		b.Fatal(err)
	}
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(ctx)
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	inv := runtime.Invocation{Input: json.RawMessage(`{"name":"bench"}`), RunID: "r"}
	rec, err := m.Invoke(ctx, inv)
	if err != nil {
		b.Fatal(err)
	}
	tr := &Trace{Format: Format, Node: rec.Node, RunID: "r", Attempt: 1, Input: inv.Input, Calls: rec.Trace,
		Expected: Expected{Outcome: rec.Outcome, Output: rec.Output}}
	b.Run("original", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := m.Invoke(ctx, inv); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("replay", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			v, err := Run(ctx, m, tr, nil)
			if err != nil || !v.Identical {
				b.Fatalf("%v %+v", err, v)
			}
		}
	})
}

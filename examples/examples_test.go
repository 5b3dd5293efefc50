package examples

import (
	"context"
	"encoding/json"
	"os"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/runtime"
)

func TestHelloExamples(t *testing.T) {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	for _, ex := range []struct{ dir, pack, encoding string }{
		{"hello-wat", "local.hello.wat", "packed-i64"},
		{"hello-wat-multivalue", "local.hello.wat-multivalue", "multi-value"},
		{"hello-c", "local.hello.c", "packed-i64"},
		{"hello-go", "local.hello.go", "packed-i64"},
	} {
		t.Run(ex.dir, func(t *testing.T) {
			wasm, err := os.ReadFile(ex.dir + "/hello.wasm")
			if err != nil {
				t.Fatal(err)
			}
			m, err := rt.Load(ctx, wasm, runtime.LoadOptions{Name: ex.dir})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(ctx)
			info := m.Info()
			if info.PackName != ex.pack || len(info.Nodes) != 1 || info.Nodes[0] != "example.hello" || info.Encoding[abi.ExportNodeInvoke] != ex.encoding {
				t.Fatalf("info %+v", info)
			}
			for in, want := range map[string]string{
				`{"name":"x"}`:       `{"greeting":"Hello, x!"}`,
				`{}`:                 `{"greeting":"Hello, world!"}`,
				`{"name":"Ünïcødé"}`: `{"greeting":"Hello, Ünïcødé!"}`,
			} {
				res, err := m.Invoke(ctx, runtime.Invocation{Input: json.RawMessage(in)})
				if err != nil {
					t.Fatal(err)
				}
				if res.Outcome != abi.Completed || string(res.Output) != want {
					t.Errorf("%s -> %s %s %v, want %s", in, res.Outcome, res.Output, res.Error, want)
				}
			}
		})
	}
}

package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/packrun/packrun/runtime"
)

// Load a module and invoke its node.
func Example() {
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	wasm, err := os.ReadFile("../examples/hello-c/hello.wasm")
	if err != nil {
		panic(err)
	}
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{Name: "hello.wasm"})
	if err != nil {
		panic(err) // a *runtime.LoadError says why the module was refused
	}
	defer m.Close(ctx)

	res, err := m.Invoke(ctx, runtime.Invocation{Input: json.RawMessage(`{"name":"Ada"}`)})
	if err != nil {
		panic(err)
	}
	fmt.Println(m.Info().Nodes, res.Outcome, string(res.Output))
	// Output: [example.hello] completed {"greeting":"Hello, Ada!"}
}

// Limits are per module; a breach ends the invocation with a cap.breached
// event instead of hurting the host.
func ExampleLimits() {
	ctx := context.Background()
	rt, _ := runtime.New(ctx, runtime.NewConfig())
	defer rt.Close(ctx)

	wasm, _ := os.ReadFile("../testdata/hostile/loop_in_node.wasm")
	m, err := rt.Load(ctx, wasm, runtime.LoadOptions{Limits: runtime.Limits{Timeout: 50 * time.Millisecond}})
	if err != nil {
		panic(err)
	}
	defer m.Close(ctx)
	res, _ := m.Invoke(ctx, runtime.Invocation{})
	b := res.Breach()
	fmt.Println(res.Outcome, res.Error.Code, b.Kind, b.Limit)
	// Output: failed cap_breached wasm-execution-time 50
}

// Host services: the run's variables and channels are supplied by the caller
// and shared by the invocations of one run.
func ExampleRunState() {
	ctx := context.Background()
	rt, _ := runtime.New(ctx, runtime.NewConfig())
	defer rt.Close(ctx)

	wasm, _ := os.ReadFile("../testdata/modules/probe.wasm")
	m, _ := rt.Load(ctx, wasm, runtime.LoadOptions{})
	defer m.Close(ctx)

	state := runtime.NewMemoryRunState()
	_, _ = m.Invoke(ctx, runtime.Invocation{Node: "probe.state", RunID: "run-1", State: state})
	v, _ := state.Variable("k")
	fmt.Println(string(v), string(state.ReadChannel("c")))
	// Output: {"v":42} [1,"two"]
}

// A suspended node is resumed by invoking it again with the value its
// openwop_interrupt call should return.
func ExampleModule_Invoke_resume() {
	ctx := context.Background()
	rt, _ := runtime.New(ctx, runtime.NewConfig())
	defer rt.Close(ctx)

	wasm, _ := os.ReadFile("../testdata/hostile/interrupt.wasm")
	m, _ := rt.Load(ctx, wasm, runtime.LoadOptions{})
	defer m.Close(ctx)

	res, _ := m.Invoke(ctx, runtime.Invocation{RunID: "run-1"})
	fmt.Println(res.Outcome, string(res.Interrupt))
	res, _ = m.Invoke(ctx, runtime.Invocation{RunID: "run-1", Resume: []json.RawMessage{json.RawMessage(`"yes"`)}})
	fmt.Println(res.Outcome, string(res.Output))
	// Output:
	// suspended {"question":"approve?"}
	// completed {"resumed":"yes"}
}

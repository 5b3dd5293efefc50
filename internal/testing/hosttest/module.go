package hosttest

import (
	"context"
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/runtime"
)

// Load loads wasm into a new runtime; t's cleanup closes both.
func Load(t testing.TB, wasm []byte, opts runtime.LoadOptions) *runtime.Module {
	t.Helper()
	ctx := context.Background()
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close(ctx) })
	m, err := rt.Load(ctx, wasm, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctx) })
	return m
}

// LoadFile loads the module at path like Load.
func LoadFile(t testing.TB, path string, opts runtime.LoadOptions) *runtime.Module {
	t.Helper()
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return Load(t, wasm, opts)
}

// Invoke runs inv on m and fails t if the runtime returns an error.
func Invoke(t testing.TB, m *runtime.Module, inv runtime.Invocation) *runtime.Result {
	t.Helper()
	res, err := m.Invoke(context.Background(), inv)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// Completed fails t unless res completed with output equal (as JSON) to want.
func Completed(t testing.TB, res *runtime.Result, want string) {
	t.Helper()
	if res.Outcome != abi.Completed {
		t.Fatalf("%s: outcome %s, error %v", res.Node, res.Outcome, res.Error)
	}
	if !JSONEqual(res.Output, want) {
		t.Fatalf("%s: output %s\nwant %s", res.Node, res.Output, want)
	}
}

// JSONEqual reports whether got and want are both JSON and decode to the
// same value.
func JSONEqual(got []byte, want string) bool {
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

// HasLog reports whether res logged msg at level.
func HasLog(res *runtime.Result, level, msg string) bool {
	for _, l := range res.Logs {
		if l.Level == level && l.Message == msg {
			return true
		}
	}
	return false
}

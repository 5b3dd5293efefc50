package replay

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/runtime"
)

func sample(t *testing.T) []byte {
	t.Helper()
	tr, err := FromAttempt(&host.Attempt{
		AttemptID: "a1", ModuleSHA256: strings.Repeat("ab", 32), Node: "n", ABIVersion: "1", RunID: "r", Attempt: 1,
		Input: json.RawMessage(`{"x":1}`), Outcome: abi.Completed, Output: json.RawMessage(`{"y":2}`),
		Trace: json.RawMessage(`[{"fn":"openwop.openwop_now_ms","result":"AQAAAAAAAAA="}]`),
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := tr.Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParse(t *testing.T) {
	good := sample(t)
	tr, err := Parse(good)
	if err != nil || len(tr.Calls) != 1 || tr.Calls[0].Fn != "openwop.openwop_now_ms" || len(tr.Calls[0].Result) != 8 {
		t.Fatalf("round trip: %v %+v", err, tr)
	}
	edit := func(from, to string) []byte { return []byte(strings.Replace(string(good), from, to, 1)) }
	for name, b := range map[string][]byte{
		"edited value":    edit(`"AQAAAAAAAAA="`, `"AgAAAAAAAAA="`),
		"edited output":   edit(`"y": 2`, `"y": 3`),
		"other format":    edit(Format, "packrun-trace/v9"),
		"unknown field":   edit(`"format"`, `"extra": 1, "format"`),
		"not json":        []byte(`{"format":`),
		"bad module hash": edit(strings.Repeat("ab", 32), "xyz"),
		"empty":           nil,
	} {
		if _, err := Parse(b); !errors.Is(err, ErrInvalidTrace) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"format":"packrun-trace/v1"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := Parse(b); err != nil && !errors.Is(err, ErrInvalidTrace) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// Two outputs are the same JSON value whatever their spacing and key
// order; byte-equal ones, what an identical replay makes, are compared
// without decoding (no allocation).
func TestSameJSON(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{`{"greeting":"Hello, n!"}`, `{"greeting":"Hello, n!"}`, true},
		{`{"a":1,"b":[2]}`, `{ "b": [ 2 ], "a": 1 }`, true},
		{``, ``, true},
		{`{"a":1}`, `{"a":2}`, false},
		{`{"a":1}`, ``, false},
		{`not json`, `not json`, true},
		{`not json`, `not  json`, false},
	} {
		if got := sameJSON(json.RawMessage(tc.a), json.RawMessage(tc.b)); got != tc.same {
			t.Errorf("sameJSON(%q, %q) = %v", tc.a, tc.b, got)
		}
	}
	out := json.RawMessage(`{"greeting":"Hello, n!","n":[1,2,3]}`)
	again := append(json.RawMessage(nil), out...)
	if n := testing.AllocsPerRun(100, func() { sameJSON(out, again) }); n != 0 {
		t.Fatalf("%v allocations comparing byte-equal outputs", n)
	}
}

func TestDiff(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{`{"a":{"b":[1,2]}}`, `{"a":{"b":[1,3]}}`, "at $.a.b[1] expected 2, got 3"},
		{`{"a":1}`, `{"a":1,"c":2}`, "at $.c expected null, got 2"},
		{`1`, `"x"`, `at $ expected 1, got "x"`},
	} {
		got := Diff(json.RawMessage(c.a), json.RawMessage(c.b))
		if got != c.want {
			t.Errorf("Diff(%s, %s) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// TestReuseDivergenceDetected: a module that opted in to reusing instance
// state produces outputs that depend on earlier invocations; replay on
// fresh state reports the difference.
func TestReuseDivergenceDetected(t *testing.T) {
	ctx := context.Background()
	wasm, err := os.ReadFile("../../testdata/modules/probe.wasm")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := runtime.New(ctx, runtime.NewConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	reuse, err := rt.Load(ctx, wasm, runtime.LoadOptions{ReuseInstances: true})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := rt.Load(ctx, wasm, runtime.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var rec *runtime.Result
	for i := 0; i < 2; i++ {
		if rec, err = reuse.Invoke(ctx, runtime.Invocation{Node: "probe.counter"}); err != nil {
			t.Fatal(err)
		}
	}
	tr := &Trace{Format: Format, Node: "probe.counter", Input: json.RawMessage(`{}`), Calls: rec.Trace,
		Expected: Expected{Outcome: rec.Outcome, Output: rec.Output}}
	v, err := Run(ctx, fresh, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v.Identical || !strings.Contains(v.Difference, "at $.count expected 2, got 1") {
		t.Fatalf("reused state not detected: %+v", v)
	}
}

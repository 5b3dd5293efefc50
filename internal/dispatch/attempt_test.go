package dispatch

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/runtime"
)

// helloResult is what the C hello node's invocation returns: an output,
// no logs, no trace, no services used.
func helloResult() *runtime.Result {
	return &runtime.Result{Outcome: abi.Completed, Node: "example.hello",
		Output: json.RawMessage(`{"greeting":"Hello, bench!"}`), HostCalls: 0, MemoryBytes: 131072}
}

// TestAttemptOfJSONAsMarshal: the logs, trace and diagnostics attemptOf
// writes are byte for byte what json.Marshal writes for them (the record
// is hashed, and records written before must read the same), in the
// common case it writes directly and in those it leaves to json.Marshal.
func TestAttemptOfJSONAsMarshal(t *testing.T) {
	for _, tc := range []struct {
		name string
		res  *runtime.Result
		svc  func(*services)
	}{
		{"hello", helloResult(), nil},
		{"zero", &runtime.Result{Outcome: abi.Completed}, nil},
		{"large", &runtime.Result{Outcome: abi.Completed, HostCalls: 1 << 40, MemoryBytes: 1<<64 - 1}, nil},
		{"logs and trace", &runtime.Result{Outcome: abi.Completed, HostCalls: 3, MemoryBytes: 65536,
			Logs:  []runtime.LogEntry{{Level: "info", Message: "a \"quoted\" <line>"}},
			Trace: []runtime.Call{{Fn: "kv_get", Args: []byte("k"), Result: []byte("v")}}}, nil},
		{"empty logs", &runtime.Result{Outcome: abi.Completed, Logs: []runtime.LogEntry{}, Trace: []runtime.Call{}}, nil},
		{"truncated", &runtime.Result{Outcome: abi.Completed, HostCalls: 2, Truncated: []string{"stdout"}}, nil},
		{"staged", helloResult(), func(s *services) { s.followUpsRefused = 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newServices(binding{})
			if tc.svc != nil {
				tc.svc(svc)
			}
			a := attemptOf(tc.res, svc)
			logs, _ := json.Marshal(tc.res.Logs)
			trace, _ := json.Marshal(tc.res.Trace)
			diag := map[string]any{"hostCalls": tc.res.HostCalls, "memoryBytes": tc.res.MemoryBytes}
			if svc.followUpsRefused > 0 {
				diag["followUpsRefused"] = map[string]any{"count": svc.followUpsRefused, "reason": "result_policy.allow_follow_up_tasks is false"}
			}
			if len(tc.res.Truncated) > 0 {
				diag["truncated"] = tc.res.Truncated
			}
			d, _ := json.Marshal(diag)
			for _, c := range []struct {
				field     string
				got, want []byte
			}{{"logs", a.Logs, logs}, {"trace", a.Trace, trace}, {"diagnostics", a.Diagnostics, d}} {
				if !bytes.Equal(c.got, c.want) {
					t.Errorf("%s = %s, json.Marshal writes %s", c.field, c.got, c.want)
				}
			}
		})
	}
}

// BenchmarkAttemptOf: the evidence record's fields built from the C hello
// node's result (the dispatcher's share of an attempt's evidence CPU).
func BenchmarkAttemptOf(b *testing.B) {
	res := helloResult()
	svc := newServices(binding{})
	b.ReportAllocs()
	for b.Loop() {
		attemptOf(res, svc)
	}
}

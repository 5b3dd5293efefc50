package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
)

func fixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func newTestRuntime(t testing.TB, cfg Config) *Runtime {
	t.Helper()
	r, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(context.Background()) })
	return r
}

// testLimits keep hostile fixtures quick: 16 MiB memory, 200 ms.
var testLimits = Limits{MemoryBytes: 16 << 20, Timeout: 200 * time.Millisecond}

// TestHostileLoad covers fixtures the host must refuse at load.
func TestHostileLoad(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	cases := []struct {
		fixture  string
		code     string
		mentions []string
		breach   string
	}{
		{"abi_version_999", CodeUnsupportedABI, []string{"999", "1.3"}, ""},
		{"unknown_import", CodeUnknownImport, []string{"env.launch_missiles", "openwop.openwop_teleport", "ABI 1.3"}, ""},
		{"missing_export", CodeMissingExport, []string{"openwop_node_invoke"}, ""},
		{"invalid_utf8_pack_name", CodeInvalidPackName, []string{"UTF-8"}, ""},
		{"start_memory_min_too_big", CodeMemoryTooLarge, []string{"4000 pages"}, ""},
		{"loop_in_start", CodeInitFailed, []string{"did not finish"}, abi.CapTime},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			_, err := r.Load(context.Background(), fixture(t, "testdata/hostile/"+c.fixture+".wasm"), LoadOptions{Name: c.fixture, Limits: testLimits})
			le, ok := errors.AsType[*LoadError](err)
			if !ok || !errors.Is(err, ErrRefused) {
				t.Fatalf("err = %v, want a *LoadError", err)
			}
			if le.Code != c.code {
				t.Fatalf("code = %s, want %s (%v)", le.Code, c.code, err)
			}
			for _, m := range c.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if !strings.HasPrefix(err.Error(), c.fixture+": ") {
				t.Errorf("error %q does not name the module", err)
			}
			if c.breach != "" && (le.Breach == nil || le.Breach.Kind != c.breach) {
				t.Errorf("breach = %+v, want %s", le.Breach, c.breach)
			}
			assertHealthy(t, r)
		})
	}
}

// TestHostileInvoke covers fixtures that load but misbehave when invoked.
func TestHostileInvoke(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	baseline := heapInUse()
	cases := []struct {
		fixture string
		limits  Limits
		code    string
		breach  string
		check   func(t *testing.T, res *Result)
	}{
		// The floods and bombs get time to reach their own limit on a
		// loaded machine: the time limit is not what they test.
		{fixture: "memory_bomb", limits: Limits{Timeout: 10 * time.Second}, code: abi.CodeCapBreached, breach: abi.CapMemory, check: func(t *testing.T, res *Result) {
			if e := res.Breach(); e.Limit != 16<<20 || e.Observed != 16<<20+wasmPage {
				t.Errorf("event %+v, want limit 16 MiB observed one page more", e)
			}
		}},
		{fixture: "loop_in_node", code: abi.CodeCapBreached, breach: abi.CapTime, check: func(t *testing.T, res *Result) {
			if e := res.Breach(); e.Limit != 200 || e.Observed < 200 {
				t.Errorf("event %+v", e)
			}
		}},
		{fixture: "response_ptr_oob", code: abi.CodeResponseOutOfBounds},
		{fixture: "response_len_huge", code: abi.CodeResponseOutOfBounds},
		{fixture: "invalid_json_response", code: abi.CodeResponseJSON},
		{fixture: "invalid_utf8_response", code: abi.CodeResponseUTF8},
		{fixture: "deep_recursion", limits: Limits{Timeout: 10 * time.Second}, code: abi.CodeStackExhausted},
		{fixture: "unreachable_trap", code: abi.CodeTrap, check: func(t *testing.T, res *Result) {
			if !strings.Contains(res.Error.Message, "unreachable") {
				t.Errorf("message %q", res.Error.Message)
			}
		}},
		{fixture: "log_flood", limits: Limits{HostCalls: 100_000, CaptureBytes: 4096, Timeout: 10 * time.Second}, code: abi.CodeCapBreached, breach: abi.CapHostCalls, check: func(t *testing.T, res *Result) {
			if e := res.Breach(); e.Limit != 100_000 || e.Observed != 100_001 {
				t.Errorf("event %+v", e)
			}
			if !slices.Contains(res.Truncated, "logs") {
				t.Errorf("logs not marked truncated (%d entries)", len(res.Logs))
			}
		}},
		// A flood too (see memory_bomb): CI once hit the 200 ms limit first.
		{fixture: "output_100mib", limits: Limits{MemoryBytes: 128 << 20, Timeout: 10 * time.Second}, code: abi.CodeCapBreached, breach: abi.CapOutput, check: func(t *testing.T, res *Result) {
			if e := res.Breach(); e.Limit != 16<<20 || e.Observed != 100<<20 {
				t.Errorf("event %+v", e)
			}
		}},
		{fixture: "proc_exit", code: abi.CodeExit, check: func(t *testing.T, res *Result) {
			if string(res.Error.Details) != `{"exitCode":3}` {
				t.Errorf("details %s", res.Error.Details)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			l := testLimits
			if c.limits.MemoryBytes != 0 {
				l.MemoryBytes = c.limits.MemoryBytes
			}
			l.HostCalls = c.limits.HostCalls
			l.CaptureBytes = c.limits.CaptureBytes
			if c.limits.Timeout != 0 {
				l.Timeout = c.limits.Timeout
			}
			m, err := r.Load(context.Background(), fixture(t, "testdata/hostile/"+c.fixture+".wasm"), LoadOptions{Name: c.fixture, Limits: l})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			res, err := m.Invoke(context.Background(), Invocation{Input: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Outcome != abi.Failed || res.Error == nil || res.Error.Code != c.code {
				t.Fatalf("outcome %s error %+v, want failed %s", res.Outcome, res.Error, c.code)
			}
			if c.breach != "" {
				if e := res.Breach(); e == nil || e.Kind != c.breach {
					t.Fatalf("events %+v, want %s breach", res.Events, c.breach)
				}
			} else if len(res.Events) != 0 {
				t.Fatalf("unexpected events %+v", res.Events)
			}
			if c.check != nil {
				c.check(t, res)
			}
			assertHealthy(t, r)
			// Memory returns to baseline: closed instances (a 100 MiB output,
			// a bombed memory) are released.
			if now := heapInUse(); now > baseline+32<<20 {
				t.Fatalf("heap in use %d MiB after %s, baseline %d MiB", now>>20, c.fixture, baseline>>20)
			}
		})
	}
}

func heapInUse() uint64 {
	var ms goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// assertHealthy checks that a good module still runs and that goroutines
// have returned to (near) their baseline.
func assertHealthy(t *testing.T, r *Runtime) {
	t.Helper()
	before := goruntime.NumGoroutine()
	m, err := r.Load(context.Background(), fixture(t, "examples/hello-wat/hello.wasm"), LoadOptions{Name: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := m.Invoke(context.Background(), Invocation{Input: json.RawMessage(`{"name":"ok"}`)})
	if err != nil || res.Outcome != abi.Completed || string(res.Output) != `{"greeting":"Hello, ok!"}` {
		t.Fatalf("good module after hostile one: %v %+v", err, res)
	}
	m.Close(context.Background())
	deadline := time.Now().Add(2 * time.Second)
	for goruntime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := goruntime.NumGoroutine(); n > before+1 {
		t.Fatalf("goroutines: %d before, %d after", before, n)
	}
}

// TestImportMinor: an import added in a later minor of its namespace is
// refused for a pack that declares an older one, and loads otherwise.
func TestImportMinor(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	wasm := fixture(t, "testdata/hostile/newer_minor_import.wasm")
	ctx := context.Background()
	_, err := r.Load(ctx, wasm, LoadOptions{Name: "old", ABI: abi.Version{Major: 1, Minor: 0}})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "sensor_emit was added in ABI 1.1; the pack declares 1.0") {
		t.Fatalf("a 1.0 pack importing sensor_emit: %v", err)
	}
	for _, v := range []abi.Version{{Major: 1, Minor: 1}, {}} {
		m, err := r.Load(ctx, wasm, LoadOptions{Name: "new", ABI: v})
		if err != nil {
			t.Fatalf("ABI %s: %v", v, err)
		}
		m.Close(ctx)
	}
}

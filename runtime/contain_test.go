package runtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/packrun/packrun/abi"
)

// totalAlloc is the bytes the Go heap has allocated so far: its growth
// across a call bounds what the call cost the host, whatever was freed.
func totalAlloc() uint64 {
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// TestContainInvoke covers the hostile modules of the containment issue
// that load and then misbehave: each ends with its documented outcome, the
// host allocates a bounded amount meanwhile, and a good module still runs.
func TestContainInvoke(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	limits := Limits{MemoryBytes: 32 << 20, Timeout: 500 * time.Millisecond, HostMemoryBytes: 16 << 20}
	cases := []struct {
		fixture string
		outcome abi.Outcome
		code    string // the error code of a failed outcome
		breach  string
		// timeout, if set, replaces the 500 ms limit: the floods get time
		// to reach their host-memory limit on a loaded machine.
		timeout time.Duration
		check   func(t *testing.T, res *Result)
	}{
		{fixture: "reenter_alloc", outcome: abi.Failed, code: abi.CodeHostReentered, check: func(t *testing.T, res *Result) {
			if !strings.Contains(res.Error.Message, "openwop_variable_get was called from inside openwop_alloc") {
				t.Errorf("message %q", res.Error.Message)
			}
		}},
		{fixture: "interrupt_in_alloc", outcome: abi.Failed, code: abi.CodeHostReentered},
		{fixture: "variable_flood", timeout: 10 * time.Second, outcome: abi.Failed, code: abi.CodeCapBreached, breach: abi.CapHostMemory, check: func(t *testing.T, res *Result) {
			if e := res.Breach(); e.Limit != 16<<20 || e.Observed <= 16<<20 || e.Observed > 17<<20+1024 {
				t.Errorf("event %+v, want limit 16 MiB, observed within one value of it", e)
			}
		}},
		{fixture: "channel_flood", timeout: 10 * time.Second, outcome: abi.Failed, code: abi.CodeCapBreached, breach: abi.CapHostMemory},
		{fixture: "table_grow", outcome: abi.Completed, check: func(t *testing.T, res *Result) {
			if string(res.Output) != `{"grown":-1}` {
				t.Errorf("output %s: a table.grow of 2^27 entries succeeded", res.Output)
			}
		}},
		{fixture: "sleep_past_deadline", outcome: abi.Failed, code: abi.CodeCapBreached, breach: abi.CapTime, check: func(t *testing.T, res *Result) {
			if e := res.Breach(); e.Limit != 500 || e.Observed < 500 {
				t.Errorf("event %+v", e)
			}
			if res.Duration < 500*time.Millisecond || res.Duration > 5*time.Second {
				t.Errorf("took %s for a 500 ms limit", res.Duration)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			l := limits
			if c.timeout != 0 {
				l.Timeout = c.timeout
			}
			m, err := r.Load(context.Background(), fixture(t, "testdata/hostile/"+c.fixture+".wasm"), LoadOptions{Name: c.fixture, Limits: l})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			before := totalAlloc()
			res, err := m.Invoke(context.Background(), Invocation{Input: json.RawMessage(`{}`)})
			if err != nil {
				t.Fatal(err)
			}
			if grew := totalAlloc() - before; grew > 96<<20 {
				t.Errorf("the invocation allocated %d MiB on the host (memory limit 32 MiB, host-memory 16 MiB)", grew>>20)
			}
			if res.Outcome != c.outcome {
				t.Fatalf("outcome %s (error %+v, events %+v), want %s", res.Outcome, res.Error, res.Events, c.outcome)
			}
			if c.code != "" && (res.Error == nil || res.Error.Code != c.code) {
				t.Fatalf("error %+v, want %s", res.Error, c.code)
			}
			if c.breach != "" {
				if e := res.Breach(); e == nil || e.Kind != c.breach {
					t.Fatalf("events %+v, want a %s breach", res.Events, c.breach)
				}
			} else if len(res.Events) != 0 {
				t.Fatalf("unexpected events %+v", res.Events)
			}
			if c.check != nil {
				c.check(t, res)
			}
			assertHealthy(t, r)
		})
	}
}

// TestContainReplay: a replay of a time breach from a WASI sleep stops at
// the same call, and a replay of a host-memory breach breaches alike.
func TestContainReplay(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	for _, name := range []string{"sleep_past_deadline", "variable_flood"} {
		t.Run(name, func(t *testing.T) {
			m, err := r.Load(context.Background(), fixture(t, "testdata/hostile/"+name+".wasm"), LoadOptions{Name: name, Limits: Limits{Timeout: 300 * time.Millisecond, HostMemoryBytes: 4 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close(context.Background())
			live, err := m.Invoke(context.Background(), Invocation{})
			if err != nil || live.Breach() == nil {
				t.Fatalf("live: %v %+v", err, live)
			}
			again, err := m.Invoke(context.Background(), Invocation{Replay: &Replay{Calls: live.Trace}})
			if err != nil {
				t.Fatal(err)
			}
			if again.Divergence != nil || again.Breach() == nil || again.Breach().Kind != live.Breach().Kind {
				t.Fatalf("replay: divergence %v, events %+v; live %+v", again.Divergence, again.Events, live.Events)
			}
		})
	}
}

// TestContainLoad covers the hostile modules refused at load.
func TestContainLoad(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	cases := []struct {
		fixture  string
		code     string
		mentions []string
		breach   string
	}{
		{"table_max_huge", CodeModuleLimit, []string{"table 0", "table maximum size 268435456", "1048576"}, ""},
		{"import_table_global", CodeUnknownImport, []string{"env.table (table)", "env.flag (global)"}, ""},
		{"grow_refused_in_start", CodeInitFailed, []string{"wasm-memory"}, abi.CapMemory},
	}
	for _, c := range cases {
		t.Run(c.fixture, func(t *testing.T) {
			_, err := r.Load(context.Background(), fixture(t, "testdata/hostile/"+c.fixture+".wasm"), LoadOptions{Name: c.fixture, Limits: testLimits})
			le, ok := errors.AsType[*LoadError](err)
			if !ok || le.Code != c.code {
				t.Fatalf("err = %v, want a %s refusal", err, c.code)
			}
			for _, m := range c.mentions {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not mention %q", err, m)
				}
			}
			if c.breach != "" && (le.Breach == nil || le.Breach.Kind != c.breach) {
				t.Errorf("breach %+v, want %s", le.Breach, c.breach)
			}
			assertHealthy(t, r)
		})
	}
}

// TestContainShapes builds, at run time, the large module shapes the
// containment campaign found costly (each cost gigabytes or tens of
// seconds to compile or instantiate) and checks each is refused at load,
// naming its limit, in bounded time and host memory.
func TestContainShapes(t *testing.T) {
	r := newTestRuntime(t, NewConfig())
	lim := DefaultModuleLimits()
	cases := []struct {
		name  string
		wasm  func() []byte
		limit string
	}{
		{"100k nested blocks", func() []byte { return shapeModule(shapeNesting, 100_000) }, "block nesting depth"},
		{"br_table of 500k targets", func() []byte { return shapeModule(shapeBrTable, 500_000) }, "br_table targets"},
		{"a passive element segment of 30M entries", func() []byte { return shapeModule(shapeElements, 30_000_000) }, "element segment entries"},
		{"5M globals", func() []byte { return shapeModule(shapeGlobals, 5_000_000) }, "global count"},
		{"300k functions", func() []byte { return shapeModule(shapeFunctions, 300_000) }, "function count"},
		{"a 5 MiB function body", func() []byte { return shapeModule(shapeBody, 5<<20) }, "function body bytes"},
		{"a 65 MiB module", func() []byte { return make([]byte, lim.ModuleBytes+1) }, "module bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wasm := c.wasm()
			before := totalAlloc()
			start := time.Now()
			_, err := r.Load(context.Background(), wasm, LoadOptions{Name: "shape"})
			took := time.Since(start)
			grew := totalAlloc() - before
			le, ok := errors.AsType[*LoadError](err)
			if !ok || le.Code != CodeModuleLimit || !strings.Contains(err.Error(), c.limit) {
				t.Fatalf("err = %v, want %s naming %q", err, CodeModuleLimit, c.limit)
			}
			if len(err.Error()) > 300 {
				t.Errorf("refusal is %d bytes long", len(err.Error()))
			}
			if grew > 16<<20 {
				t.Errorf("refusing a %d-byte module allocated %d MiB", len(wasm), grew>>20)
			}
			t.Logf("%d bytes refused in %s, %d KiB allocated", len(wasm), took, grew>>10)
			assertHealthy(t, r)
		})
	}
}

// TestContainShapesAtLimits: modules exactly at each limit load and
// compile, in bounded host memory.
func TestContainShapesAtLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles modules at the shape limits")
	}
	r := newTestRuntime(t, NewConfig().WithPoolSize(0))
	lim := DefaultModuleLimits()
	for _, c := range []struct {
		kind shapeKind
		n    int
	}{
		{shapeNesting, lim.Nesting - 1}, // the body's own block counts
		{shapeBrTable, lim.BrTableTargets},
		{shapeElements, lim.ElementEntries},
		{shapeGlobals, lim.Globals},
		{shapeFunctions, lim.Functions},
	} {
		t.Run(c.kind.String(), func(t *testing.T) {
			wasm := shapeModule(c.kind, c.n)
			before := totalAlloc()
			start := time.Now()
			_, err := r.Load(context.Background(), wasm, LoadOptions{Name: "shape"})
			took := time.Since(start)
			// The shape module is not a node pack: getting as far as the
			// export check means it was decoded, validated and compiled.
			le, ok := errors.AsType[*LoadError](err)
			if !ok || le.Code != CodeMissingExport {
				t.Fatalf("err = %v, want it compiled and then refused as %s", err, CodeMissingExport)
			}
			grew := totalAlloc() - before
			t.Logf("%s at %d: %d bytes compiled in %s, %d MiB allocated", c.kind, c.n, len(wasm), took, grew>>20)
			if grew > 512<<20 {
				t.Errorf("compiling a module at the %s limit allocated %d MiB", c.kind, grew>>20)
			}
		})
	}
}

// FuzzModuleShapes generates modules of each shape near small limits: a
// module within them must compile (and then be refused only for not being
// a node pack), one beyond them must be refused with module_limit, and
// neither may panic.
func FuzzModuleShapes(f *testing.F) {
	for k := range shapeKinds {
		f.Add(uint8(k), uint16(63), uint16(0))
		f.Add(uint8(k), uint16(65), uint16(1))
	}
	lim := ModuleLimits{Nesting: 64, BrTableTargets: 64, ElementEntries: 64, Globals: 64, Functions: 64, BodyBytes: 4096, TableEntries: 64}
	r, err := New(context.Background(), NewConfig().WithPoolSize(0).WithModuleLimits(lim))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { r.Close(context.Background()) })
	lim = r.cfg.modules
	f.Fuzz(func(t *testing.T, kind uint8, n uint16, extra uint16) {
		k := shapeKind(kind % uint8(shapeKinds))
		count := int(n % 4200)
		wasm := shapeModule(k, count)
		_, err := r.Load(context.Background(), wasm, LoadOptions{Name: "shape"})
		le, ok := errors.AsType[*LoadError](err)
		if !ok {
			t.Fatalf("%s %d: err = %v, want a *LoadError", k, count, err)
		}
		over := k.over(count, lim)
		switch {
		case over && le.Code != CodeModuleLimit:
			t.Fatalf("%s %d is over the limits but was refused as %v", k, count, err)
		case !over && le.Code != CodeMissingExport:
			t.Fatalf("%s %d is within the limits but was refused as %v", k, count, err)
		}
		_ = extra
	})
}

// The shapes of TestContainShapes and FuzzModuleShapes.
type shapeKind uint8

const (
	shapeNesting shapeKind = iota
	shapeBrTable
	shapeElements
	shapeGlobals
	shapeFunctions
	shapeBody
	shapeTable
	shapeKinds
)

func (k shapeKind) String() string {
	return [...]string{"nesting", "br_table", "elements", "globals", "functions", "body", "table"}[k]
}

// over reports whether a shapeModule(k, n) exceeds lim.
func (k shapeKind) over(n int, lim ModuleLimits) bool {
	switch k {
	case shapeNesting:
		return n+1 > lim.Nesting
	case shapeBrTable:
		return n > lim.BrTableTargets
	case shapeElements:
		return n > lim.ElementEntries
	case shapeGlobals:
		return n > lim.Globals
	case shapeFunctions:
		return n > lim.Functions
	case shapeBody:
		return n > lim.BodyBytes
	case shapeTable:
		return n > lim.TableEntries
	}
	return false
}

// shapeModule encodes a valid module (no imports, no node-pack exports)
// with n of one shape: n nested blocks in one body, a br_table of n
// targets, a passive element segment of n entries, n globals, n functions,
// a body of n bytes, or a table of n entries.
func shapeModule(k shapeKind, n int) []byte {
	uleb := func(b []byte, v int) []byte { return binary.AppendUvarint(b, uint64(v)) }
	section := func(out []byte, id byte, body []byte) []byte {
		return append(uleb(append(out, id), len(body)), body...)
	}
	out := []byte("\x00asm\x01\x00\x00\x00")
	out = section(out, 1, []byte{1, 0x60, 0, 0}) // type 0: () -> ()
	funcs := 1
	if k == shapeFunctions {
		funcs = n
	}
	fs := uleb(nil, funcs)
	for range funcs {
		fs = append(fs, 0)
	}
	out = section(out, 3, fs)
	if k == shapeTable {
		out = section(out, 4, uleb(uleb([]byte{1, 0x70, 0x01}, n), n)) // min = max = n
	}
	if k == shapeGlobals {
		g := uleb(nil, n)
		for range n {
			g = append(g, 0x7f, 0x00, 0x41, 0x00, 0x0b) // i32 const, i32.const 0
		}
		out = section(out, 6, g)
	}
	if k == shapeElements {
		e := uleb([]byte{1, 0x01, 0x00}, n) // one passive segment of funcref indices
		for range n {
			e = append(e, 0)
		}
		out = section(out, 9, e)
	}
	var body []byte
	switch k {
	case shapeNesting:
		for range n {
			body = append(body, 0x02, 0x40)
		}
		for range n {
			body = append(body, 0x0b)
		}
	case shapeBrTable:
		body = append(body, 0x02, 0x40, 0x41, 0x00, 0x0e)
		body = uleb(body, n)
		for range n + 1 {
			body = append(body, 0)
		}
		body = append(body, 0x0b)
	case shapeBody:
		body = make([]byte, max(n-2, 0)) // n bytes with the locals and the end
		for i := range body {
			body[i] = 0x01 // nop
		}
	}
	fn := append([]byte{0}, append(body, 0x0b)...) // no locals, the body, end
	code := uleb(nil, funcs)
	for range funcs {
		code = append(uleb(code, len(fn)), fn...)
	}
	return section(out, 10, code)
}

// TestContainCompileDeadline: a module still compiling at the compile
// deadline is refused, naming the limit, and the host carries on.
func TestContainCompileDeadline(t *testing.T) {
	r := newTestRuntime(t, NewConfig().WithModuleLimits(ModuleLimits{CompileTimeout: time.Millisecond}))
	_, err := r.Load(context.Background(), shapeModule(shapeFunctions, 100_000), LoadOptions{Name: "slow"})
	le, ok := errors.AsType[*LoadError](err)
	if !ok || le.Code != CodeModuleLimit || !strings.Contains(err.Error(), "compilation did not finish in time") {
		t.Fatalf("err = %v", err)
	}
	// (This runtime refuses everything; the process carries on.)
	assertHealthy(t, newTestRuntime(t, NewConfig()))
}

package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/packrun/packrun/abi"
)

// Extism plugins (modules importing extism:host/env) run through the Extism
// go-sdk with the same limits, the same fresh-state rule (a new plugin
// instance per invocation), the same recorded WASI sources, and the
// packrun:host/v1 services registered as Extism host functions. Each node is
// an exported plugin function; its input is the node's input JSON and its
// output (JSON, or text returned as a JSON string) is the node's output.
//
// packrun:host/v1 for Extism plugins follows the Extism host-function
// convention: func(request_offset i64) -> response_offset i64, where the
// request is the JSON request and the response is
// {"status":<abi status>,"body":<response JSON or null>}.

// ModuleExtism is the import namespace that marks an Extism plugin.
const ModuleExtism = "extism:host/env"

type extismPlugin struct {
	compiled *extism.CompiledPlugin
	exports  []string // by node index
}

func isExtism(cm wazero.CompiledModule) bool {
	for _, f := range cm.ImportedFunctions() {
		if mod, _, _ := f.Import(); mod == ModuleExtism {
			return true
		}
	}
	return false
}

// loadExtism validates and compiles an Extism plugin.
func (r *Runtime) loadExtism(ctx context.Context, wasm []byte, cm wazero.CompiledModule, opts LoadOptions, limits Limits, m *Module) error {
	var unknown []string
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		switch mod {
		case ModuleExtism:
			if want, ok := extismHTTPSigs[name]; ok && sigOf(f) != want {
				return refuse(CodeBadSignature, "%s.%s is declared %s; Extism declares it %s", mod, name, sigOf(f), want)
			}
		case abi.ModuleWASI:
		case abi.ModuleHostV1:
			if spec, ok := abi.Lookup(abi.HostV1Imports(), name); !ok {
				unknown = append(unknown, mod+"."+name)
			} else if !spec.Allowed(opts.ABI) {
				return refuse(CodeBadSignature, "%s.%s was added in ABI %d.%d; the pack declares %s (raise runtime.abi.minor)", mod, name, opts.ABI.Major, spec.Minor, opts.ABI)
			} else if !slicesEqual(f.ParamTypes(), []api.ValueType{api.ValueTypeI64}) || !slicesEqual(f.ResultTypes(), []api.ValueType{api.ValueTypeI64}) {
				return refuse(CodeBadSignature, "%s.%s is declared %s; Extism plugins import packrun:host/v1 functions as (i64) -> (i64)", mod, name, sigOf(f))
			}
		default:
			unknown = append(unknown, mod+"."+name)
		}
	}
	if len(unknown) > 0 {
		e := refuse(CodeUnknownImport, "Extism plugin imports %d function(s) this host does not serve: %s (this host serves %s, %s and wasi_snapshot_preview1 to Extism plugins)",
			len(unknown), joinList(unknown), ModuleExtism, abi.ModuleHostV1)
		e.Items = listed(unknown)
		return e
	}
	if mem, ok := cm.ExportedMemories()["memory"]; ok {
		if need := uint64(mem.Min()) * wasmPage; need > limits.MemoryBytes {
			return refuse(CodeMemoryTooLarge, "module declares a minimum memory of %d pages, above the %d-byte limit", mem.Min(), limits.MemoryBytes)
		}
	}
	exported := cm.ExportedFunctions()
	nodes := opts.Exports
	if len(nodes) == 0 { // every plugin function () -> i32 is a node named by its export
		nodes = map[string]string{}
		for name, d := range exported {
			if !strings.HasPrefix(name, "_") && len(d.ParamTypes()) == 0 && slicesEqual(d.ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
				nodes[name] = name
			}
		}
	}
	if len(nodes) == 0 {
		return refuse(CodeInvalidNodes, "Extism plugin exports no function () -> i32 to serve as a node")
	}
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	p := &extismPlugin{}
	m.nodes = map[string]int{}
	for i, id := range ids {
		export := nodes[id]
		if d, ok := exported[export]; !ok || len(d.ParamTypes()) != 0 || !slicesEqual(d.ResultTypes(), []api.ValueType{api.ValueTypeI32}) {
			return refuse(CodeMissingExport, "node %s: the plugin does not export %s as a function () -> i32", id, export)
		}
		m.nodes[id] = i
		p.exports = append(p.exports, export)
	}
	rc := wazero.NewRuntimeConfig().WithCloseOnContextDone(true).WithCompilationCache(r.cache).WithMemoryLimitPages(65536)
	var funcs []extism.HostFunction
	for _, f := range abi.HostV1Imports() {
		name := f.Name
		hf := extism.NewHostFunctionWithStack(name, func(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64) {
			extismHostCall(ctx, cp, stack, name)
		}, []extism.ValueType{extism.ValueTypeI64}, []extism.ValueType{extism.ValueTypeI64})
		hf.SetNamespace(abi.ModuleHostV1)
		funcs = append(funcs, hf)
	}
	funcs = append(funcs, extismHTTPFuncs()...)
	// The kernel's own http functions (http.DefaultClient, its own allowed
	// hosts) are never linked: the plugin's imports of them are moved to
	// packrun's namespace, served through the pack's http grant.
	wasm, err := renameImports(wasm, ModuleExtism, moduleExtismHTTP, extismHTTPImports)
	if err != nil {
		return refuse(CodeInvalidModule, "Extism plugin: %s", err)
	}
	compiled, err := extism.NewCompiledPlugin(ctx, extism.Manifest{Wasm: []extism.Wasm{extism.WasmData{Data: wasm}}},
		extism.PluginConfig{RuntimeConfig: rc, EnableWasi: true}, funcs)
	if err != nil {
		return &LoadError{Code: CodeInvalidModule, Msg: "Extism plugin: " + firstLine(err), Err: err}
	}
	p.compiled = compiled
	m.ext = p
	m.info.ABIVersion = abi.Newest().Major
	m.info.PackName = opts.PackName
	m.info.Nodes = ids
	m.info.Extism = true
	return nil
}

func slicesEqual(a, b []api.ValueType) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// extismHostCall serves one packrun:host/v1 call of an Extism plugin.
func extismHostCall(ctx context.Context, cp *extism.CurrentPlugin, stack []uint64, fn string) {
	_, a := begin(ctx, fn)
	req, err := cp.ReadBytes(stack[0])
	if err != nil || len(req) > maxHostRequest || !utf8.Valid(req) || !abi.ValidJSON(req) {
		a.replayed(abi.ModuleHostV1+"."+fn, nil)
		a.record(abi.ModuleHostV1+"."+fn, nil, abi.StatusValidation, nil)
		stack[0] = writeExtism(cp, a, abi.StatusValidation, nil)
		return
	}
	s, resp := extismServe(ctx, a, fn, req)
	stack[0] = writeExtism(cp, a, s, resp)
}

// extismServe serves a packrun:host/v1 request, from the recording on a
// replay, and records it in the trace.
func extismServe(ctx context.Context, a *activity, fn string, req []byte) (abi.Status, []byte) {
	var s abi.Status
	var resp []byte
	if c := a.replayed(abi.ModuleHostV1+"."+fn, req); c != nil {
		s, resp = abi.Status(c.Status), c.Result
	} else if a.services == nil {
		s = abi.StatusAccessDenied
	} else {
		s, resp = a.services.Serve(ctx, fn, req)
		if len(resp) <= maxHostResponse {
			// Serve's response: the trace keeps it without a copy.
			a.recordOwned(abi.ModuleHostV1+"."+fn, req, s, resp)
			return s, resp
		}
	}
	if len(resp) > maxHostResponse {
		s, resp = abi.StatusHostError, nil
	}
	a.record(abi.ModuleHostV1+"."+fn, req, s, resp)
	return s, resp
}

func writeExtism(cp *extism.CurrentPlugin, a *activity, s abi.Status, body []byte) uint64 {
	if len(body) == 0 {
		body = []byte("null")
	}
	out := append(fmt.Appendf(nil, `{"status":%d,"body":`, int32(s)), body...)
	out = append(out, '}')
	off, err := cp.WriteBytes(out)
	if err != nil {
		a.fail(abi.CodeAllocFailed, "Extism: cannot hand the response to the plugin: "+err.Error())
	}
	return off
}

// invokeExtism runs one node of an Extism plugin on a fresh plugin
// instance.
func (m *Module) invokeExtism(ctx context.Context, idx int, inv *Invocation) (*Result, error) {
	start := time.Now()
	st := &instState{m: m}
	a := newActivity(m.limits, m.rt.cfg.clock)
	a.seed = seedFor(inv.RunID, inv.NodeID, inv.Attempt)
	a.state, a.services, a.resume = inv.State, inv.Services, inv.Resume
	if inv.Replay != nil {
		a.replay = inv.Replay.Calls
		if a.replay == nil {
			a.replay = []Call{}
		}
	}
	st.act = a
	callCtx, release := st.bind(ctx)
	defer release()

	res := &Result{Node: m.info.Nodes[idx]}
	cfg := wazero.NewModuleConfig().
		WithStdin(eofReader{}).
		WithStdout(captureWriter{st, false}).
		WithStderr(captureWriter{st, true}).
		WithWalltime(st.walltime, sys.ClockResolution(time.Microsecond)).
		WithNanotime(st.nanotime, sys.ClockResolution(1)).
		WithNanosleep(st.nanosleep).
		WithOsyield(func() {}).
		WithRandSource(randReader{st})
	plugin, err := m.ext.compiled.Instance(callCtx, extism.PluginInstanceConfig{ModuleConfig: cfg})
	if err == nil {
		defer plugin.Close(context.Background())
		input := []byte(inv.Input)
		if len(input) == 0 {
			input = []byte("{}")
		}
		var rc uint32
		var out []byte
		rc, out, err = plugin.CallWithContext(callCtx, m.ext.exports[idx], input)
		if err == nil && rc != 0 {
			err = fmt.Errorf("plugin returned %d", rc)
		}
		if err == nil {
			m.extismOutput(a, out, res)
		}
	}
	if err != nil && res.Outcome == "" {
		m.guestError(callCtx, a, err, res)
		if res.Outcome == abi.Failed && res.Error != nil && res.Error.Code == abi.CodeTrap && !strings.Contains(err.Error(), "wasm error") {
			res.Error.Code = "plugin_error" // the plugin reported an error (extism set_error / non-zero return)
		}
	}
	if res.Outcome == "" {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("invoke %s: %w", res.Node, context.Cause(ctx))
		}
		res.fail(abi.CodeHostError, "Extism: the plugin call produced no outcome")
	}
	if a.breach != nil && res.Breach() == nil {
		res.breach(*a.breach)
	}
	res.Duration = time.Since(start)
	res.HostCalls, res.Trace, res.Logs = a.calls, a.trace, a.logs
	res.Stdout, res.Stderr = a.stdout.buf, a.stderr.buf
	if st.mem != nil {
		res.MemoryBytes = st.mem.peak
	}
	a.finishReplay(res)
	if a.divergence != nil {
		res.Divergence = a.divergence
		res.fail(abi.CodeReplayDiverged, a.divergence.Error())
	}
	return res, nil
}

// extismOutput turns a plugin's output bytes into the node's output.
func (m *Module) extismOutput(a *activity, out []byte, res *Result) {
	switch {
	case uint64(len(out)) > m.limits.OutputBytes:
		res.breach(Event{Type: EventCapBreached, Kind: abi.CapOutput, Limit: int64(m.limits.OutputBytes), Observed: int64(len(out))})
	case a.breach != nil:
		res.breach(*a.breach)
	case !utf8.Valid(out):
		res.fail(abi.CodeResponseUTF8, "plugin output is not valid UTF-8")
	case len(out) > 0 && json.Valid(out):
		res.Outcome, res.Output = abi.Completed, append(json.RawMessage(nil), out...)
	default: // text output becomes a JSON string
		b, _ := json.Marshal(string(out))
		res.Outcome, res.Output = abi.Completed, b
	}
}

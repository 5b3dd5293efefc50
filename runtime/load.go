package runtime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/internal/textclip"
)

// Bounds on what a module may declare about itself.
const (
	maxNodes   = 1024
	maxIDBytes = 256
)

// LoadOptions configure one module.
type LoadOptions struct {
	// Name identifies the module in errors (usually its path).
	Name string
	// Limits overrides the runtime's default limits for this module; zero
	// fields keep the default. The result is clamped by the host maxima.
	Limits Limits
	// PackName names the pack of an Extism plugin (which, unlike a
	// node-pack module, does not report one).
	PackName string
	// Exports maps node typeIds to the exported functions serving them,
	// for Extism plugins; empty means every exported function () -> i32 is
	// a node named after it.
	Exports map[string]string
	// ReuseInstances lets an instance serve several invocations, keeping
	// module state between them. Off by default: every invocation then
	// gets a fresh instance and depends only on its input and trace.
	ReuseInstances bool
	// ABI is the host ABI version the module's pack declares: an import
	// added in a later minor is refused. Zero (a bare module) allows
	// every import served.
	ABI abi.Version
}

// ModuleInfo describes a loaded module.
type ModuleInfo struct {
	Name       string   `json:"name,omitempty"`
	SHA256     string   `json:"sha256"`
	Size       int      `json:"size"`
	ABIVersion int      `json:"abiVersion"`
	PackName   string   `json:"packName"`
	Nodes      []string `json:"nodes"`
	Imports    []string `json:"imports"`
	Exports    []string `json:"exports"`
	// Encoding says how each (ptr,len) export returns: "packed-i64" or
	// "multi-value".
	Encoding       map[string]string `json:"encoding"`
	MemoryMinPages uint32            `json:"memoryMinPages"`
	MemoryMaxPages uint32            `json:"memoryMaxPages,omitempty"`
	Reactor        bool              `json:"reactor"`
	// Extism is true for an Extism plugin run through the Extism go-sdk.
	Extism bool       `json:"extism,omitempty"`
	Limits LimitsInfo `json:"limits"`
}

// Module is a validated, compiled node-pack module. Invoke may be called
// concurrently. Close releases its compiled code and prepared instances.
type Module struct {
	rt       *Runtime
	eng      *engine
	compiled wazero.CompiledModule
	info     ModuleInfo
	limits   Limits
	reuse    bool
	reactor  bool
	enc      encodings
	prepSeed [32]byte
	nodes    map[string]int
	pool     *pool
	ext      *extismPlugin // set for Extism plugins
	closed   atomic.Bool
	// life is held for reading by every invocation and for writing by
	// Close, which so waits for running invocations before it releases the
	// compiled code they run (wazero panics on a released module).
	life sync.RWMutex
}

// ptrLenEnc is how a function returns (ptr,len).
type ptrLenEnc bool

const (
	packed     ptrLenEnc = false
	multiValue ptrLenEnc = true
)

func (e ptrLenEnc) decode(out []uint64) (ptr, n uint32) {
	if e == multiValue {
		return uint32(out[0]), uint32(out[1])
	}
	return abi.UnpackPtrLen(out[0])
}

func (e ptrLenEnc) String() string {
	if e == multiValue {
		return "multi-value"
	}
	return "packed-i64"
}

type encodings struct{ packName, nodeIDAt, invoke ptrLenEnc }

// Load validates and compiles a module: its exports and their signatures,
// every import against what the host serves, its memory against the limit,
// then it initialises one instance to read the ABI version, pack name and
// nodes. A refusal is a *LoadError (errors.Is ErrRefused).
func (r *Runtime) Load(ctx context.Context, wasm []byte, opts LoadOptions) (*Module, error) {
	m, err := r.load(ctx, wasm, opts)
	if le, ok := errors.AsType[*LoadError](err); ok && le.Module == "" {
		le.Module = opts.Name
	}
	return m, err
}

func (r *Runtime) load(ctx context.Context, wasm []byte, opts LoadOptions) (*Module, error) {
	limits := opts.Limits.orDefault(r.cfg.defaults).clamp(r.cfg.max)
	if err := limits.validate(); err != nil {
		return nil, fmt.Errorf("load %s: %w", opts.Name, err)
	}
	ml := r.cfg.modules
	if len(wasm) > ml.ModuleBytes {
		return nil, shapeRefusal(&ShapeError{Limit: "module bytes", Max: int64(ml.ModuleBytes), Observed: int64(len(wasm))})
	}
	sh, err := precheck(wasm, ml)
	if se, ok := errors.AsType[*ShapeError](err); ok {
		return nil, shapeRefusal(se)
	} else if err != nil {
		return nil, refuse(CodeInvalidModule, "%v", err)
	}
	sum := sha256.Sum256(wasm)
	code := sh.bounded(wasm, ml) // what is compiled; sum stays the module's identity
	eng, err := r.engineFor(ctx, 0)
	if err != nil {
		return nil, err
	}
	unlock := r.lockCompile(sum)
	cm, err := r.compile(ctx, eng, code)
	if err != nil {
		unlock()
		return nil, err
	}
	if isExtism(cm) {
		if len(sh.otherImports) > 0 {
			unlock()
			cm.Close(ctx)
			e := refuse(CodeUnknownImport, "Extism plugin imports %s, which this host does not serve", joinList(sh.otherImports))
			e.Items = listed(sh.otherImports)
			return nil, e
		}
		defer unlock() // the Extism SDK compiles it again, possibly from the same cache
		return r.loadExtismModule(ctx, code, len(wasm), cm, opts, limits, sum)
	}
	v, lerr := checkImports(cm, eng, sh.otherImports, opts.ABI)
	if lerr == nil {
		lerr = checkMemory(cm, limits)
	}
	var enc encodings
	if lerr == nil {
		enc, lerr = checkExports(cm)
	}
	if lerr != nil {
		unlock()
		cm.Close(ctx)
		return nil, lerr
	}
	if v != 0 { // the module wants multi-value host imports: compile on that engine
		cm.Close(ctx)
		if eng, err = r.engineFor(ctx, v); err != nil {
			unlock()
			return nil, err
		}
		if cm, err = r.compile(ctx, eng, code); err != nil {
			unlock()
			return nil, err
		}
	}
	unlock()
	_, reactor := cm.ExportedFunctions()[abi.ExportInitialize]
	m := &Module{
		rt: r, eng: eng, compiled: cm, limits: limits, reuse: opts.ReuseInstances,
		reactor: reactor, enc: enc,
		prepSeed: sha256.Sum256(append([]byte("packrun/prepare/v1"), sum[:]...)),
	}
	m.info = ModuleInfo{
		Name: opts.Name, SHA256: hex.EncodeToString(sum[:]), Size: len(wasm), Reactor: reactor,
		Limits:   limits.info(),
		Encoding: map[string]string{abi.ExportPackName: enc.packName.String(), abi.ExportNodeIDAt: enc.nodeIDAt.String(), abi.ExportNodeInvoke: enc.invoke.String()},
	}
	m.info.listInterface(cm)
	mem := cm.ExportedMemories()[abi.ExportMemory]
	m.info.MemoryMinPages = mem.Min()
	if mx, ok := mem.Max(); ok {
		m.info.MemoryMaxPages = mx
	}
	if !m.cachedDescribe() {
		if err := m.describe(ctx); err != nil {
			cm.Close(ctx)
			return nil, err
		}
		m.rememberDescribe()
	}
	if !abi.Serves(m.info.ABIVersion) { // a cache entry from another build
		cm.Close(ctx)
		return nil, refuse(CodeUnsupportedABI, "module is built for ABI version %d (its openwop_abi_version); this host serves ABI version %s", m.info.ABIVersion, abi.ServedMajorsList())
	}
	m.pool = newPool(m, r.cfg.poolSize)
	if err := r.track(m); err != nil {
		m.pool.close()
		cm.Close(ctx)
		return nil, err
	}
	return m, nil
}

// shapeRefusal is the refusal of a module beyond a ModuleLimits bound.
func shapeRefusal(se *ShapeError) *LoadError {
	return &LoadError{Code: CodeModuleLimit, Msg: se.Error(), Err: se}
}

// compileWorkers is how many goroutines compile one module's functions.
var compileWorkers = max(2, min(goruntime.GOMAXPROCS(0), 4))

// errCompileTimeout is the cause of a compilation stopped by
// ModuleLimits.CompileTimeout.
var errCompileTimeout = errors.New("packrun: compile time limit")

// compile is wazero's CompileModule under the compile deadline (wazero
// checks its context between functions; the shape limits bound what one
// function can cost), with a panic inside it (wazero's validator has index
// checks missing for some malformed modules: FuzzLoad found one) turned
// into an error so that a module cannot take the host down. Failures are
// *LoadErrors, except the caller's own cancellation.
func (r *Runtime) compile(ctx context.Context, eng *engine, wasm []byte) (cm wazero.CompiledModule, err error) {
	limit := r.cfg.modules.CompileTimeout
	cctx, cancel := context.WithTimeoutCause(ctx, limit, errCompileTimeout)
	defer cancel()
	// Only wazero's parallel compiler checks its context (between
	// functions); it also compiles large modules faster.
	cctx = experimental.WithCompilationWorkers(cctx, compileWorkers)
	start := time.Now()
	defer func() {
		if p := recover(); p != nil {
			cm, err = nil, refuse(CodeInvalidModule, "the module is malformed in a way the compiler did not catch (it failed with: %v)", p)
		}
	}()
	cm, err = eng.rt.CompileModule(cctx, wasm)
	switch {
	case err == nil:
		return cm, nil
	case ctx.Err() != nil:
		return nil, fmt.Errorf("compile: %w", context.Cause(ctx))
	case context.Cause(cctx) == errCompileTimeout:
		se := &ShapeError{Limit: "compile time (ms)", Max: limit.Milliseconds(), Observed: time.Since(start).Milliseconds()}
		return nil, &LoadError{Code: CodeModuleLimit, Msg: "compilation did not finish in time: " + se.Error(), Err: se}
	}
	return nil, &LoadError{Code: CodeInvalidModule, Msg: firstLine(err), Err: err}
}

// listInterface records a compiled module's imports and (sorted) exports.
func (info *ModuleInfo) listInterface(cm wazero.CompiledModule) {
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		info.Imports = append(info.Imports, mod+"."+name)
	}
	for name := range cm.ExportedFunctions() {
		info.Exports = append(info.Exports, name)
	}
	sort.Strings(info.Exports)
}

func (r *Runtime) loadExtismModule(ctx context.Context, wasm []byte, size int, cm wazero.CompiledModule, opts LoadOptions, limits Limits, sum [32]byte) (*Module, error) {
	defer cm.Close(ctx)
	m := &Module{rt: r, limits: limits}
	m.info = ModuleInfo{Name: opts.Name, SHA256: hex.EncodeToString(sum[:]), Size: size, Limits: limits.info(), Encoding: map[string]string{}}
	m.info.listInterface(cm)
	if err := r.loadExtism(ctx, wasm, cm, opts, limits, m); err != nil {
		return nil, err
	}
	m.pool = newPool(m, 0)
	if err := r.track(m); err != nil {
		m.ext.compiled.Close(ctx)
		return nil, err
	}
	return m, nil
}

// checkImports refuses any import the host does not serve, listing each as
// module.name, and works out which engine variant the module needs.
func checkImports(cm wazero.CompiledModule, eng *engine, other []string, want abi.Version) (variant, *LoadError) {
	var v variant
	var unknown, bad []string
	unknown = append(unknown, other...) // tables, globals, tags: never served
	for _, f := range cm.ImportedFunctions() {
		mod, name, _ := f.Import()
		qual := mod + "." + name
		switch mod {
		case abi.ModuleOpenwop:
			spec, ok := abi.Lookup(abi.OpenwopImports(), name)
			if !ok {
				unknown = append(unknown, qual)
				continue
			}
			enc, ok := matches(spec, f)
			if !ok && spec.OrNoResult && len(f.ResultTypes()) == 0 {
				spec.Results = abi.ResultsNone
				if _, ok = matches(spec, f); ok {
					v |= randomNoResult
				}
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("%s is declared %s, the host serves %s", qual, sigOf(f), spec.Signature()))
			}
			if enc == multiValue {
				for i, n := range ptrLenImports {
					if n == name {
						v |= 1 << i
					}
				}
			}
		case abi.ModuleHostV1:
			spec, ok := abi.Lookup(abi.HostV1Imports(), name)
			if !ok {
				unknown = append(unknown, qual)
			} else if _, ok := matches(spec, f); !ok {
				bad = append(bad, fmt.Sprintf("%s is declared %s, the host serves %s", qual, sigOf(f), spec.Signature()))
			} else if !spec.Allowed(want) {
				bad = append(bad, fmt.Sprintf("%s was added in ABI %d.%d; the pack declares %s (raise runtime.abi.minor)", qual, want.Major, spec.Minor, want))
			}
		case abi.ModuleWASI:
			d, ok := eng.wasiDefs[name]
			if !ok {
				unknown = append(unknown, qual)
			} else if !slices.Equal(d.ParamTypes(), f.ParamTypes()) || !slices.Equal(d.ResultTypes(), f.ResultTypes()) {
				bad = append(bad, fmt.Sprintf("%s is declared %s, the host serves %s", qual, sigOf(f), sigOf(d)))
			}
		default:
			unknown = append(unknown, qual)
		}
	}
	for _, mem := range cm.ImportedMemories() {
		mod, name, _ := mem.Import()
		unknown = append(unknown, mod+"."+name+" (memory)")
	}
	if len(unknown) > 0 {
		e := refuse(CodeUnknownImport, "module imports %d thing(s) this host does not serve: %s (this host serves ABI %s: namespaces %s, %s, %s)",
			len(unknown), joinList(unknown), abi.ServedList(), abi.ModuleOpenwop, abi.ModuleHostV1, abi.ModuleWASI)
		e.Items = listed(append(unknown, bad...))
		return 0, e
	}
	if len(bad) > 0 {
		e := refuse(CodeBadSignature, "%s", joinList(bad))
		e.Items = listed(bad)
		return 0, e
	}
	return v, nil
}

func checkMemory(cm wazero.CompiledModule, l Limits) *LoadError {
	mem, ok := cm.ExportedMemories()[abi.ExportMemory]
	if !ok {
		return nil // reported by checkExports
	}
	if need := uint64(mem.Min()) * wasmPage; need > l.MemoryBytes {
		return refuse(CodeMemoryTooLarge, "module declares a minimum memory of %d pages (%d bytes), above the %d-byte limit", mem.Min(), need, l.MemoryBytes)
	}
	return nil
}

func checkExports(cm wazero.CompiledModule) (encodings, *LoadError) {
	var enc encodings
	var missing, bad []string
	if _, ok := cm.ExportedMemories()[abi.ExportMemory]; !ok {
		missing = append(missing, abi.ExportMemory+" (memory)")
	}
	exps := cm.ExportedFunctions()
	for _, spec := range abi.Exports() {
		d, ok := exps[spec.Name]
		if !ok {
			if spec.Required {
				missing = append(missing, spec.Name)
			}
			continue
		}
		e, ok := matches(spec, d)
		if !ok {
			bad = append(bad, fmt.Sprintf("%s is %s, the ABI requires %s", spec.Name, sigOf(d), spec.Signature()))
		}
		switch spec.Name {
		case abi.ExportPackName:
			enc.packName = e
		case abi.ExportNodeIDAt:
			enc.nodeIDAt = e
		case abi.ExportNodeInvoke:
			enc.invoke = e
		}
	}
	if len(missing) > 0 {
		e := refuse(CodeMissingExport, "module does not export %s, required by ABI %s", joinList(missing), abi.ServedList())
		e.Items = listed(missing)
		return enc, e
	}
	if len(bad) > 0 {
		e := refuse(CodeBadSignature, "%s", joinList(bad))
		e.Items = listed(bad)
		return enc, e
	}
	return enc, nil
}

// matches checks a function definition against an ABI signature and reports
// which (ptr,len) encoding it uses.
func matches(spec abi.Func, d api.FunctionDefinition) (ptrLenEnc, bool) {
	params := make([]api.ValueType, len(spec.Params))
	for i, p := range spec.Params {
		params[i] = api.ValueType(p)
	}
	if !slices.Equal(params, d.ParamTypes()) {
		return packed, false
	}
	res := d.ResultTypes()
	switch spec.Results {
	case abi.ResultsNone:
		return packed, len(res) == 0
	case abi.ResultsI32:
		return packed, slices.Equal(res, []api.ValueType{api.ValueTypeI32})
	case abi.ResultsI64:
		return packed, slices.Equal(res, []api.ValueType{api.ValueTypeI64})
	case abi.ResultsPtrLen:
		if slices.Equal(res, []api.ValueType{api.ValueTypeI64}) {
			return packed, true
		}
		return multiValue, slices.Equal(res, []api.ValueType{api.ValueTypeI32, api.ValueTypeI32})
	}
	return packed, false
}

func sigOf(d api.FunctionDefinition) string {
	names := func(ts []api.ValueType) string {
		s := ""
		for i, t := range ts {
			if i > 0 {
				s += " "
			}
			s += api.ValueTypeName(t)
		}
		return "(" + s + ")"
	}
	return names(d.ParamTypes()) + " -> " + names(d.ResultTypes())
}

// joinList joins items with commas, naming at most the first
// maxListed and counting the rest, so that a refusal stays one short line
// however many problems a module has.
func joinList(items []string) string {
	var b strings.Builder
	for i, it := range items {
		if i == maxListed {
			fmt.Fprintf(&b, " and %d more", len(items)-maxListed)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(textclip.Clip(it, maxItemBytes))
	}
	return b.String()
}

// listed bounds LoadError.Items: the first 100, each clipped.
func listed(items []string) []string {
	out := make([]string, 0, min(len(items), 100))
	for _, it := range items[:min(len(items), 100)] {
		out = append(out, textclip.Clip(it, maxItemBytes))
	}
	return out
}

const (
	maxListed    = 10
	maxItemBytes = 120
)

// describe initialises a probe instance and reads the module's ABI version,
// pack name and node ids. The probe is discarded: it has run guest code, and
// invocations only ever get instances that have not.
func (m *Module) describe(ctx context.Context) error {
	inst, err := m.newInstance(ctx)
	if err != nil {
		return err
	}
	defer inst.close()
	a := newActivity(m.limits, m.rt.cfg.clock)
	a.deterministic = true
	inst.st.act = a
	ctx, cancel := context.WithTimeoutCause(ctx, m.limits.Timeout, errTimeout)
	defer cancel()
	ctx = context.WithValue(ctx, stateKey{}, inst.st)

	call := func(name string, args ...uint64) ([]uint64, error) {
		out, err := inst.mod.ExportedFunction(name).Call(ctx, args...)
		if err != nil {
			return nil, initError(ctx, a, fmt.Errorf("%s: %w", name, err))
		}
		return out, nil
	}
	readStr := func(what string, enc ptrLenEnc, out []uint64) (string, error) {
		ptr, n := enc.decode(out)
		if n == 0 || n > maxIDBytes {
			return "", fmt.Errorf("%s has length %d (want 1..%d bytes)", what, n, maxIDBytes)
		}
		b, ok := inst.mod.Memory().Read(ptr, n)
		if !ok {
			return "", fmt.Errorf("%s (ptr %#x, len %d) is outside the module's memory", what, ptr, n)
		}
		if !utf8.Valid(b) {
			return "", fmt.Errorf("%s %q is not valid UTF-8", what, b)
		}
		return string(b), nil
	}

	out, err := call(abi.ExportABIVersion)
	if err != nil {
		return err
	}
	ver := int(int32(out[0]))
	if !abi.Serves(ver) {
		return refuse(CodeUnsupportedABI, "module is built for ABI version %d (its openwop_abi_version); this host serves ABI version %s", ver, abi.ServedMajorsList())
	}
	m.info.ABIVersion = ver

	if out, err = call(abi.ExportPackName); err != nil {
		return err
	}
	if m.info.PackName, err = readStr("pack name", m.enc.packName, out); err != nil {
		return refuse(CodeInvalidPackName, "%v", err)
	}

	if out, err = call(abi.ExportNodeCount); err != nil {
		return err
	}
	count := int32(out[0])
	if count < 1 || count > maxNodes {
		return refuse(CodeInvalidNodes, "openwop_node_count returned %d (want 1..%d)", count, maxNodes)
	}
	m.nodes = make(map[string]int, count)
	for i := range count {
		if out, err = call(abi.ExportNodeIDAt, uint64(i)); err != nil {
			return err
		}
		id, err := readStr(fmt.Sprintf("node %d typeId", i), m.enc.nodeIDAt, out)
		if err != nil {
			return refuse(CodeInvalidNodes, "%v", err)
		}
		if _, dup := m.nodes[id]; dup {
			return refuse(CodeInvalidNodes, "node typeId %q appears twice", id)
		}
		m.nodes[id] = int(i)
		m.info.Nodes = append(m.info.Nodes, id)
	}
	return nil
}

// Info describes the module.
func (m *Module) Info() ModuleInfo { return m.info }

func (m *Module) nodeIndex(typeID string) (int, error) {
	if typeID == "" {
		if len(m.info.Nodes) == 1 {
			return 0, nil
		}
		return 0, fmt.Errorf("%w: module has %d nodes (%s); name one", ErrUnknownNode, len(m.info.Nodes), joinList(m.info.Nodes))
	}
	i, ok := m.nodes[typeID]
	if !ok {
		return 0, fmt.Errorf("%w: %q is not a node of %s (nodes: %s)", ErrUnknownNode, typeID, m.info.PackName, joinList(m.info.Nodes))
	}
	return i, nil
}

// Close stops instance preparation and releases the module, once the
// invocations already running have ended; later ones fail with ErrClosed.
func (m *Module) Close(ctx context.Context) error {
	if m.closed.Swap(true) {
		return nil
	}
	m.life.Lock()
	defer m.life.Unlock()
	m.rt.untrack(m)
	m.pool.close()
	if m.ext != nil {
		return m.ext.compiled.Close(ctx)
	}
	return m.compiled.Close(ctx)
}

package runtime

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/packrun/packrun/abi"
)

// Per-call bounds on what a guest may hand to a host function.
const (
	maxLogMessage   = 64 << 10
	maxRandomBytes  = 64 << 10
	maxNameBytes    = 1 << 10
	maxValueBytes   = 1 << 20
	maxInterruptLen = 1 << 20
)

// Trace names of host calls.
const (
	fnLog          = abi.ModuleOpenwop + "." + abi.ImportLog
	fnNowMs        = abi.ModuleOpenwop + "." + abi.ImportNowMs
	fnRandom       = abi.ModuleOpenwop + "." + abi.ImportRandom
	fnVariableGet  = abi.ModuleOpenwop + "." + abi.ImportVariableGet
	fnVariableSet  = abi.ModuleOpenwop + "." + abi.ImportVariableSet
	fnChannelRead  = abi.ModuleOpenwop + "." + abi.ImportChannelRead
	fnChannelWrite = abi.ModuleOpenwop + "." + abi.ImportChannelWrite
	fnInterrupt    = abi.ModuleOpenwop + "." + abi.ImportInterrupt
	fnWalltime     = "wasi.walltime"
	fnNanotime     = "wasi.nanotime"
	fnNanosleep    = "wasi.nanosleep"
	fnRandomGet    = "wasi.random"
	fnStdout       = "wasi.stdout"
	fnStderr       = "wasi.stderr"
)

type stateKey struct{}

func stateOf(ctx context.Context) *instState { return ctx.Value(stateKey{}).(*instState) }

// openwopHostModule builds the "openwop" import namespace for variant v.
// Host functions never panic except with errAbort after recording on the
// activity why the guest must stop; failures a guest can handle are status
// codes.
func openwopHostModule(rt wazero.Runtime, v variant) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(abi.ModuleOpenwop)
	i32 := api.ValueTypeI32
	i64 := api.ValueTypeI64
	ptrLen := func(name string) []api.ValueType {
		for i, n := range ptrLenImports {
			if n == name && v&(1<<i) != 0 {
				return []api.ValueType{i32, i32}
			}
		}
		return []api.ValueType{i64}
	}
	fn := func(name string, f api.GoModuleFunc, params, results []api.ValueType) {
		b.NewFunctionBuilder().WithGoModuleFunction(f, params, results).Export(name)
	}
	fn(abi.ImportLog, hostLog, []api.ValueType{i32, i32, i32}, nil)
	fn(abi.ImportNowMs, hostNowMs, nil, []api.ValueType{i64})
	if v&randomNoResult != 0 {
		fn(abi.ImportRandom, hostRandomNoResult, []api.ValueType{i32, i32}, nil)
	} else {
		fn(abi.ImportRandom, hostRandom, []api.ValueType{i32, i32}, []api.ValueType{i32})
	}
	fn(abi.ImportVariableGet, hostVariableGet, []api.ValueType{i32, i32}, ptrLen(abi.ImportVariableGet))
	fn(abi.ImportVariableSet, hostVariableSet, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	fn(abi.ImportChannelRead, hostChannelRead, []api.ValueType{i32, i32}, ptrLen(abi.ImportChannelRead))
	fn(abi.ImportChannelWrite, hostChannelWrite, []api.ValueType{i32, i32, i32, i32}, []api.ValueType{i32})
	fn(abi.ImportInterrupt, hostInterrupt, []api.ValueType{i32, i32}, ptrLen(abi.ImportInterrupt))
	return b
}

// begin charges a host call of fn and returns the calling instance's state
// and current activity. It stops a guest that calls the host from inside
// the openwop_alloc or openwop_free the host is running (the re-entrancy
// rule of package abi): serving it would re-enter the allocator, without
// bound, and wazero does not support a guest function being re-entered
// from inside its own host call.
func begin(ctx context.Context, fn string) (*instState, *activity) {
	st := stateOf(ctx)
	a := st.act
	if st.inAllocator != "" {
		a.fail(abi.CodeHostReentered, fmt.Sprintf("%s was called from inside %s, which the host was running to pass the module a buffer; a module's allocator must not call host imports", fn, st.inAllocator))
	}
	a.count()
	return st, a
}

// read copies guest bytes [ptr, ptr+n), or reports false when they are out of
// range or longer than limit.
func read(mod api.Module, ptr, n uint32, limit int) ([]byte, bool) {
	if int(n) > limit {
		return nil, false
	}
	b, ok := mod.Memory().Read(ptr, n)
	if !ok {
		return nil, false
	}
	return append([]byte(nil), b...), true
}

func hostLog(ctx context.Context, mod api.Module, stack []uint64) {
	_, a := begin(ctx, abi.ImportLog)
	level, ptr, n := int32(stack[0]), uint32(stack[1]), uint32(stack[2])
	if n > maxLogMessage {
		n = maxLogMessage
	}
	msg, ok := mod.Memory().Read(ptr, n)
	if !ok {
		a.fail(abi.CodeHostCallBounds, fmt.Sprintf("openwop_log: message (ptr %#x, len %d) is outside the module's memory", ptr, n))
	}
	args := append([]byte{byte(level)}, msg...)
	a.replayed(fnLog, args)
	a.record(fnLog, args, 0, nil)
	a.log(level, strings.ToValidUTF8(string(msg), "\uFFFD"))
}

func hostNowMs(ctx context.Context, _ api.Module, stack []uint64) {
	_, a := begin(ctx, abi.ImportNowMs)
	var ms int64
	if c := a.replayed(fnNowMs, nil); c != nil {
		ms = int64(a.replayedU64(c))
	} else {
		ms = a.now().UnixMilli()
	}
	a.record(fnNowMs, nil, 0, binary.LittleEndian.AppendUint64(nil, uint64(ms)))
	stack[0] = uint64(ms)
}

func hostRandom(ctx context.Context, mod api.Module, stack []uint64) {
	_, a := begin(ctx, abi.ImportRandom)
	stack[0] = uint64(fillRandom(a, mod, stack))
}

// hostRandomNoResult serves openwop_random as RFC 0008 §C declares it,
// (out_ptr, len) with no result: with no status to return, a buffer the
// module cannot have (out of its memory, or above the per-call bound) stops
// the guest instead of being answered with validation_error.
func hostRandomNoResult(ctx context.Context, mod api.Module, stack []uint64) {
	_, a := begin(ctx, abi.ImportRandom)
	if s := fillRandom(a, mod, stack); s != abi.StatusOK {
		a.fail(abi.CodeHostCallBounds, fmt.Sprintf("openwop_random: buffer (ptr %#x, len %d) is outside the module's memory or above %d bytes", uint32(stack[0]), uint32(stack[1]), maxRandomBytes))
	}
}

// fillRandom fills the guest's (ptr, len) buffer from the invocation's
// random stream (or the recorded bytes on replay) and records the call.
func fillRandom(a *activity, mod api.Module, stack []uint64) abi.Status {
	ptr, n := uint32(stack[0]), uint32(stack[1])
	args := binary.LittleEndian.AppendUint32(nil, n)
	c := a.replayed(fnRandom, args)
	buf, ok := mod.Memory().Read(ptr, n)
	if n > maxRandomBytes || !ok {
		a.record(fnRandom, args, abi.StatusValidation, nil)
		return abi.StatusValidation
	}
	if c != nil {
		a.replayedBytes(c, buf)
	} else {
		_, _ = a.random().Read(buf) // ChaCha8.Read always fills buf and returns nil
	}
	a.record(fnRandom, args, abi.StatusOK, buf)
	return abi.StatusOK
}

func hostVariableGet(ctx context.Context, mod api.Module, stack []uint64) {
	st, a := begin(ctx, abi.ImportVariableGet)
	name, ok := read(mod, uint32(stack[0]), uint32(stack[1]), maxNameBytes)
	var v json.RawMessage
	if c := a.replayed(fnVariableGet, name); c != nil {
		v = c.Result
	} else if ok && a.state != nil {
		v, _ = a.state.Variable(string(name))
	}
	a.record(fnVariableGet, name, 0, v)
	st.returnBytes(ctx, abi.ImportVariableGet, stack, v)
}

func hostVariableSet(ctx context.Context, mod api.Module, stack []uint64) {
	_, a := begin(ctx, abi.ImportVariableSet)
	stack[0] = uint64(setValue(a, mod, stack, fnVariableSet, func(name string, v json.RawMessage) error {
		return a.state.SetVariable(name, v)
	}))
}

func hostChannelRead(ctx context.Context, mod api.Module, stack []uint64) {
	st, a := begin(ctx, abi.ImportChannelRead)
	name, ok := read(mod, uint32(stack[0]), uint32(stack[1]), maxNameBytes)
	var v json.RawMessage
	if c := a.replayed(fnChannelRead, name); c != nil {
		v = c.Result
	} else if ok && a.state != nil {
		v = a.state.ReadChannel(string(name))
	}
	a.record(fnChannelRead, name, 0, v)
	st.returnBytes(ctx, abi.ImportChannelRead, stack, v)
}

func hostChannelWrite(ctx context.Context, mod api.Module, stack []uint64) {
	_, a := begin(ctx, abi.ImportChannelWrite)
	stack[0] = uint64(setValue(a, mod, stack, fnChannelWrite, func(name string, v json.RawMessage) error {
		return a.state.WriteChannel(name, v)
	}))
}

// setValue reads (name, JSON value) from the guest and stores it.
func setValue(a *activity, mod api.Module, stack []uint64, fn string, store func(string, json.RawMessage) error) abi.Status {
	// What the run state will hold is charged before anything is copied
	// (and on replay alike, so a replay breaches where the recording did).
	a.charge(int(min(uint32(stack[1]), maxNameBytes)) + int(min(uint32(stack[3]), maxValueBytes)))
	name, _ := read(mod, uint32(stack[0]), uint32(stack[1]), maxNameBytes)
	val, _ := read(mod, uint32(stack[2]), uint32(stack[3]), maxValueBytes)
	args := append(append(name, 0), val...)
	var s abi.Status
	if c := a.replayed(fn, args); c != nil {
		s = abi.Status(c.Status)
	} else {
		s = storeValue(a, name, val, store)
	}
	a.record(fn, args, s, nil)
	return s
}

func storeValue(a *activity, name, val []byte, store func(string, json.RawMessage) error) abi.Status {
	if a.state == nil {
		return abi.StatusHostError
	}
	if len(name) == 0 || !utf8.Valid(name) || len(val) == 0 || !json.Valid(val) {
		return abi.StatusValidation
	}
	if err := store(string(name), val); err != nil {
		return abi.StatusHostError
	}
	return abi.StatusOK
}

// hostInterrupt returns the next resume value if the caller supplied one;
// otherwise it records the payload and suspends the invocation.
func hostInterrupt(ctx context.Context, mod api.Module, stack []uint64) {
	st, a := begin(ctx, abi.ImportInterrupt)
	if a.deterministic {
		a.fail(abi.CodeHostError, "openwop_interrupt called while the module was initialising")
	}
	payload, ok := read(mod, uint32(stack[0]), uint32(stack[1]), maxInterruptLen)
	if c := a.replayed(fnInterrupt, payload); c != nil && len(c.Result) > 0 {
		a.record(fnInterrupt, payload, 0, c.Result)
		st.returnBytes(ctx, abi.ImportInterrupt, stack, c.Result)
		return
	} else if c == nil && a.resumed < len(a.resume) {
		v := a.resume[a.resumed]
		a.resumed++
		a.record(fnInterrupt, payload, 0, v)
		st.returnBytes(ctx, abi.ImportInterrupt, stack, v)
		return
	}
	a.record(fnInterrupt, payload, 0, nil)
	if !ok || !utf8.Valid(payload) || !json.Valid(payload) {
		a.fail(abi.CodeResponseEnvelope, "openwop_interrupt: payload is not a JSON value within bounds")
	}
	a.interrupt = payload
	panic(errAbort)
}

// returnBytes hands v to the guest in a buffer from its openwop_alloc and
// writes (ptr,len) in the encoding the import was declared with. A nil v is
// returned as (0,0).
func (st *instState) returnBytes(ctx context.Context, name string, stack []uint64, v []byte) {
	var ptr uint32
	if len(v) > 0 {
		ptr = st.guestAlloc(ctx, v)
	}
	n := uint32(len(v))
	if st.m.eng.v.multi(name) {
		stack[0], stack[1] = uint64(ptr), uint64(n)
	} else {
		stack[0] = abi.PackPtrLen(ptr, n)
	}
}

func (v variant) multi(name string) bool {
	for i, n := range ptrLenImports {
		if n == name {
			return v&(1<<i) != 0
		}
	}
	return false
}

// guestAlloc copies b into a buffer obtained from the guest's openwop_alloc.
func (st *instState) guestAlloc(ctx context.Context, b []byte) uint32 {
	if st.inst == nil {
		st.act.fail(abi.CodeHostError, "host call returning a buffer made from the start function")
	}
	res, err := st.inst.callAllocator(ctx, st.inst.alloc, abi.ExportAlloc, uint64(len(b)))
	if err != nil {
		panic(err) // the guest trapped inside its allocator: propagate the trap
	}
	ptr := uint32(res[0])
	if ptr == 0 || !st.inst.mod.Memory().Write(ptr, b) {
		st.act.fail(abi.CodeAllocFailed, "openwop_alloc returned an unusable buffer")
	}
	return ptr
}

package runtime

import (
	"context"
	"encoding/binary"
	"unicode/utf8"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"github.com/packrun/packrun/abi"
)

// Services serves the packrun:host/v1 namespace (memory, queue, adapters,
// evidence, artifacts, config) for one invocation. The host binds an
// implementation per attempt (tenant, grants, run); the runtime only moves
// bytes and records every call in the trace.
type Services interface {
	// Serve handles one call of fn (one of abi.HostV1Imports()) with the
	// module's JSON request and returns a status and a JSON response (nil
	// for none). It must not panic and must respect ctx. The response
	// belongs to the runtime once Serve returns (the trace keeps it
	// without a copy): an implementation must not change it afterwards.
	Serve(ctx context.Context, fn string, req []byte) (abi.Status, []byte)
}

// Per-call bounds for packrun:host/v1.
const (
	maxHostRequest  = 4 << 20
	maxHostResponse = 16 << 20
)

func hostV1Module(rt wazero.Runtime) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder(abi.ModuleHostV1)
	i32 := api.ValueTypeI32
	for _, f := range abi.HostV1Imports() {
		name, traced := f.Name, abi.ModuleHostV1+"."+f.Name // built once, not per call
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
			hostV1Call(ctx, mod, stack, name, traced)
		}), []api.ValueType{i32, i32, i32}, []api.ValueType{i32}).Export(name)
	}
	return b
}

// hostV1Call serves fn, traced as module.fn (traced).
func hostV1Call(ctx context.Context, mod api.Module, stack []uint64, fn, traced string) {
	st, a := begin(ctx, fn)
	reqPtr, reqLen, out := uint32(stack[0]), uint32(stack[1]), uint32(stack[2])
	owned := false // resp is Serve's: the trace keeps it without a copy
	status := func(s abi.Status, req, resp []byte) {
		if owned {
			a.recordOwned(traced, req, s, resp)
		} else {
			a.record(traced, req, s, resp)
		}
		stack[0] = uint64(uint32(s))
	}
	req, ok := read(mod, reqPtr, reqLen, maxHostRequest)
	if !ok || !utf8.Valid(req) || !abi.ValidJSON(req) {
		a.replayed(traced, nil)
		status(abi.StatusValidation, nil, nil)
		return
	}
	if _, ok := mod.Memory().Read(out, 8); !ok {
		a.fail(abi.CodeHostCallBounds, fn+": response slot outside the module's memory")
	}
	var s abi.Status
	var resp []byte
	if c := a.replayed(traced, req); c != nil {
		s, resp = abi.Status(c.Status), c.Result
	} else if a.services == nil || a.deterministic {
		s = abi.StatusAccessDenied
	} else {
		s, resp = a.services.Serve(ctx, fn, req)
		owned = true
	}
	if len(resp) > maxHostResponse {
		s, resp = abi.StatusHostError, nil
	}
	var ptr uint32
	if len(resp) > 0 {
		ptr = st.guestAlloc(ctx, resp)
	}
	var slot [8]byte
	binary.LittleEndian.PutUint32(slot[:4], ptr)
	binary.LittleEndian.PutUint32(slot[4:], uint32(len(resp)))
	mod.Memory().Write(out, slot[:])
	status(s, req, resp)
}

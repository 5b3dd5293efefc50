package runtime

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
	"github.com/tetratelabs/wazero/sys"

	"github.com/packrun/packrun/abi"
)

// instance is one instantiated module, used by at most one invocation at a
// time and, unless the module opted in to reuse, by exactly one.
type instance struct {
	mod                 api.Module
	alloc, free, invoke api.Function // free is only looked up for reuse
	st                  *instState
	// reqPtr/reqCap is the host-owned request buffer in guest memory.
	reqPtr uint32
	reqCap int
}

// instState is the per-instance data host functions reach through the call
// context. act is swapped for each activity (preparation, then invocation).
type instState struct {
	m    *Module
	inst *instance
	mem  *linearMemory
	act  *activity
	// inAllocator names the export (openwop_alloc, openwop_free) the host
	// is running, if any: host imports are refused meanwhile (begin).
	inAllocator string
}

// callAllocator calls the guest's openwop_alloc or openwop_free with host
// imports barred for its duration.
func (i *instance) callAllocator(ctx context.Context, f api.Function, name string, args ...uint64) ([]uint64, error) {
	i.st.inAllocator = name
	defer func() { i.st.inAllocator = "" }()
	return f.Call(ctx, args...)
}

// close closes the instance. Callers are host code with none of the
// instance's guest calls running, so its memory can be recycled.
func (i *instance) close() {
	_ = i.mod.Close(context.Background())
	if i.st.mem != nil {
		i.st.mem.recycle()
	}
}

// memoryBytes is the largest size the instance's linear memory reached.
func (i *instance) memoryBytes() uint64 {
	if i.st.mem == nil {
		return 0
	}
	return i.st.mem.peak
}

// bind returns the context an instantiation runs under: bounded by the
// module's time limit, cancelled when the activity stops it (a breach),
// and carrying the instance state and its memory allocator. release frees
// the context's resources.
func (st *instState) bind(ctx context.Context) (_ context.Context, release func()) {
	a := st.act
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, st.m.limits.Timeout, errTimeout)
	ctx, cancel := context.WithCancelCause(ctx)
	a.stop = func() { cancel(errBreached) }
	a.deadline, _ = ctx.Deadline()
	ctx = context.WithValue(ctx, stateKey{}, st)
	ctx = experimental.WithMemoryAllocator(ctx, st)
	return ctx, func() { cancel(nil); cancelTimeout() }
}

// newInstance instantiates the module and runs its initialisers under a
// deterministic activity bounded by the module's limits. The result has
// never served an invocation.
func (m *Module) newInstance(ctx context.Context) (*instance, error) {
	st := &instState{m: m}
	a := newActivity(m.limits, m.rt.cfg.clock)
	a.deterministic = true
	a.seed = m.prepSeed
	st.act = a

	ctx, release := st.bind(ctx)
	defer release()

	cfg := wazero.NewModuleConfig().
		WithName("").
		WithStartFunctions().
		WithStdin(eofReader{}).
		WithStdout(captureWriter{st, false}).
		WithStderr(captureWriter{st, true}).
		WithWalltime(st.walltime, sys.ClockResolution(time.Microsecond)).
		WithNanotime(st.nanotime, sys.ClockResolution(1)).
		WithNanosleep(st.nanosleep).
		WithOsyield(func() {}).
		WithRandSource(randReader{st})
	mod, err := m.eng.rt.InstantiateModule(ctx, m.compiled, cfg)
	if err == nil && m.reactor {
		_, err = mod.ExportedFunction(abi.ExportInitialize).Call(ctx)
	}
	if err == nil && a.breach != nil {
		// A limit hit the guest survived (a refused memory.grow): the
		// module cannot initialise within its limits.
		err = errBreached
	}
	if err != nil {
		if mod != nil {
			mod.Close(context.Background())
		}
		return nil, initError(ctx, a, err)
	}
	inst := &instance{
		mod:    mod,
		alloc:  mod.ExportedFunction(abi.ExportAlloc),
		invoke: mod.ExportedFunction(abi.ExportNodeInvoke),
		st:     st,
	}
	if m.reuse {
		inst.free = mod.ExportedFunction(abi.ExportFree)
	}
	st.inst = inst
	// Allocate the request buffer now, so an invocation whose request fits
	// makes a single guest call. Preparation is deterministic, so this
	// happens identically on replay.
	// A module that cannot spare the bytes just allocates per invocation.
	if err := inst.reserve(ctx, requestReserve); err != nil {
		if _, unusable := err.(*allocError); !unusable {
			mod.Close(context.Background())
			return nil, initError(ctx, a, err)
		}
	}
	st.act = nil
	return inst, nil
}

// requestReserve is the request buffer a prepared instance gets up front.
const requestReserve = 4096

// reserve makes sure the instance holds a host-owned request buffer of at
// least n bytes, obtained from openwop_alloc (the previous one is freed when
// the instance is reused).
func (i *instance) reserve(ctx context.Context, n int) error {
	if n <= i.reqCap {
		return nil
	}
	out, err := i.callAllocator(ctx, i.alloc, abi.ExportAlloc, uint64(n))
	if err != nil {
		return err
	}
	ptr := uint32(out[0])
	if ptr == 0 || uint64(ptr)+uint64(n) > uint64(i.mod.Memory().Size()) {
		return &allocError{size: n, ptr: ptr}
	}
	if i.reqCap > 0 && i.free != nil {
		if _, err := i.callAllocator(ctx, i.free, abi.ExportFree, uint64(i.reqPtr), uint64(i.reqCap)); err != nil {
			return err
		}
	}
	i.reqPtr, i.reqCap = ptr, n
	return nil
}

type allocError struct {
	size int
	ptr  uint32
}

func (e *allocError) Error() string {
	return fmt.Sprintf("openwop_alloc(%d) returned unusable pointer %#x", e.size, e.ptr)
}

// initError explains a failure while instantiating or initialising.
func initError(ctx context.Context, a *activity, err error) *LoadError {
	le := &LoadError{Code: CodeInitFailed, Err: err}
	switch {
	case a.breach != nil:
		le.Breach = a.breach
		le.Msg = fmt.Sprintf("initialisation hit the %s limit (%d, observed %d)", a.breach.Kind, a.breach.Limit, a.breach.Observed)
	case errors.Is(context.Cause(ctx), errTimeout):
		e := Event{Type: EventCapBreached, Kind: abi.CapTime, Limit: a.limits.Timeout.Milliseconds(), Observed: a.limits.Timeout.Milliseconds()}
		le.Breach = &e
		le.Msg = fmt.Sprintf("initialisation did not finish within %s", a.limits.Timeout)
	case a.failure != nil:
		le.Msg = "initialisation failed: " + a.failure.Error()
	default:
		le.Msg = "initialisation failed: " + firstLine(err)
	}
	return le
}

// firstLine trims wazero's multi-line trap messages (with stack traces) to
// their first line.
func firstLine(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, " (recovered by wazero)")
}

// WASI sources. They run inside WASI host functions, so they may panic with
// errAbort exactly like openwop host functions.

func (st *instState) walltime() (int64, int32) {
	a := st.act
	a.count()
	t := a.now()
	if c := a.replayed(fnWalltime, nil); c != nil {
		t = time.Unix(0, int64(a.replayedU64(c)))
	}
	a.record(fnWalltime, nil, 0, binary.LittleEndian.AppendUint64(nil, uint64(t.UnixNano())))
	return t.Unix(), int32(t.Nanosecond())
}

func (st *instState) nanotime() int64 {
	a := st.act
	a.count()
	var n int64
	if c := a.replayed(fnNanotime, nil); c != nil {
		n = int64(a.replayedU64(c))
	} else {
		n = a.nanotime()
	}
	a.record(fnNanotime, nil, 0, binary.LittleEndian.AppendUint64(nil, uint64(n)))
	return n
}

// nanosleep sleeps at most until the activity's deadline. A sleep that
// would end past the deadline is a time breach: the guest sleeps until the
// deadline and is stopped there, rather than waking early to carry on as
// if it had slept (a one-hour WASI sleep must not complete under a 2 s
// limit). The trace records it with a breach status, so a replay stops at
// the same call.
func (st *instState) nanosleep(ns int64) {
	a := st.act
	a.count()
	args := binary.LittleEndian.AppendUint64(nil, uint64(ns))
	c := a.replayed(fnNanosleep, args)
	if a.deterministic || c != nil {
		a.record(fnNanosleep, args, 0, nil)
		a.fakeNanos += ns
		if c != nil && c.Status == int32(abi.StatusCapabilityBreach) {
			a.hitTime()
		}
		return
	}
	left := time.Until(a.deadline)
	if time.Duration(ns) < left {
		a.record(fnNanosleep, args, 0, nil)
		time.Sleep(time.Duration(ns))
		return
	}
	a.record(fnNanosleep, args, abi.StatusCapabilityBreach, nil)
	if left > 0 {
		time.Sleep(left)
	}
	a.hitTime()
}

type randReader struct{ st *instState }

func (r randReader) Read(p []byte) (int, error) {
	a := r.st.act
	a.count()
	args := binary.LittleEndian.AppendUint32(nil, uint32(len(p)))
	var n int
	var err error
	if c := a.replayed(fnRandomGet, args); c != nil {
		a.replayedBytes(c, p)
		n = len(p)
	} else {
		n, err = a.random().Read(p)
	}
	a.record(fnRandomGet, binary.LittleEndian.AppendUint32(nil, uint32(len(p))), 0, p[:n])
	return n, err
}

type captureWriter struct {
	st     *instState
	stderr bool
}

func (w captureWriter) Write(p []byte) (int, error) {
	a := w.st.act
	a.count()
	if w.stderr {
		a.replayed(fnStderr, p)
		a.record(fnStderr, p, 0, nil)
		// The guest sees the write succeed, as recorded: the caller's
		// writer failing must not change the run (replay would diverge).
		_, _ = a.stderr.Write(p)
	} else {
		a.replayed(fnStdout, p)
		a.record(fnStdout, p, 0, nil)
		_, _ = a.stdout.Write(p) // as stderr above
	}
	return len(p), nil
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

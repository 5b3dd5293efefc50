package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tetratelabs/wazero/sys"

	"github.com/packrun/packrun/abi"
)

// Invocation is one call of one node.
type Invocation struct {
	// Node is the typeId to invoke; it may be empty when the module has
	// exactly one node.
	Node string
	// Input is the node's input JSON (the request's "inputs"); empty means {}.
	Input json.RawMessage

	RunID    string
	NodeID   string // defaults to the typeId
	TenantID string // defaults to "default"
	// Attempt is nodeContext.attempt: 0 means 1 (packrun's tasks count
	// from 1) unless AttemptGiven, when it is used as given, 0 included
	// (openwop counts from 0). It seeds openwop_random with RunID and NodeID.
	Attempt      int
	AttemptGiven bool

	Configurable json.RawMessage
	Agent        json.RawMessage

	// Resume holds the values returned by successive openwop_interrupt
	// calls when a suspended invocation is resumed (re-invoked).
	Resume []json.RawMessage
	// State holds the run's variables and channels; nil gives the
	// invocation a fresh empty in-memory state.
	State RunState
	// Services serves packrun:host/v1 for this invocation; nil answers
	// every call with StatusAccessDenied (nothing is granted by default).
	Services Services
	// Replay, when set, re-executes a recorded invocation: every host call
	// is served from Replay.Calls (no live clock, random, state, services or
	// side effects) and must match the recording in order, function and
	// arguments; the first mismatch ends the invocation with
	// Result.Divergence set.
	Replay *Replay
}

// Replay is a recorded trace to serve an invocation from.
type Replay struct {
	Calls []Call
}

// Event is something the host observed during an invocation.
type Event struct {
	Type     string `json:"type"`
	Kind     string `json:"kind,omitempty"`
	Limit    int64  `json:"limit"`
	Observed int64  `json:"observed"`
}

// EventCapBreached is the type of the event recorded when a limit is hit.
const EventCapBreached = "cap.breached"

// LogEntry is one openwop_log message.
type LogEntry struct {
	Level   string `json:"level"`
	Message string `json:"message"`
}

// Result is what an invocation produced. Every guest behaviour, including
// traps and breaches, is described here; Invoke's error is reserved for the
// caller's own mistakes and cancellation.
type Result struct {
	Node      string
	Outcome   abi.Outcome
	Output    json.RawMessage
	Interrupt json.RawMessage
	Error     *abi.Error
	// TaskOutcome is the completed response's "taskOutcome", if it had
	// one (see abi.TaskOutcome).
	TaskOutcome *abi.TaskOutcome
	Events      []Event
	Logs        []LogEntry
	Stdout      []byte
	Stderr      []byte
	// Truncated reports which captures (stdout, stderr, logs) hit
	// Limits.CaptureBytes.
	Truncated []string
	HostCalls int
	// Trace is every host call in order, with the values the module got.
	Trace []Call
	// Divergence is set when a replay stopped matching its recording.
	Divergence *Divergence
	// MemoryBytes is the largest linear memory size the instance reached.
	MemoryBytes uint64
	Duration    time.Duration
}

// Breach returns the cap.breached event, if a limit ended the invocation.
func (r *Result) Breach() *Event {
	for i := range r.Events {
		if r.Events[i].Type == EventCapBreached {
			return &r.Events[i]
		}
	}
	return nil
}

var reqBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// Invoke runs one node on an instance that no earlier invocation has touched
// (unless the module opted in to reuse). It returns an error only when the
// invocation could not be attempted (unknown node, closed module, ctx done
// before start, invalid input JSON) or when ctx was cancelled while running.
func (m *Module) Invoke(ctx context.Context, inv Invocation) (*Result, error) {
	idx, err := m.nodeIndex(inv.Node)
	if err != nil {
		return nil, err
	}
	if len(inv.Input) > 0 && !json.Valid(inv.Input) {
		return nil, fmt.Errorf("invoke %s: input is not valid JSON", m.info.Nodes[idx])
	}
	if inv.NodeID == "" {
		inv.NodeID = m.info.Nodes[idx]
	}
	if inv.TenantID == "" {
		inv.TenantID = "default"
	}
	if inv.Attempt == 0 && !inv.AttemptGiven {
		inv.Attempt = 1
	}
	if inv.State == nil {
		inv.State = NewMemoryRunState()
	}
	m.life.RLock()
	defer m.life.RUnlock()
	if m.closed.Load() {
		return nil, ErrClosed
	}
	if m.ext != nil {
		return m.invokeExtism(ctx, idx, &inv)
	}
	start := time.Now()
	inst, err := m.pool.get(ctx)
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", m.info.Nodes[idx], err)
	}

	a := newActivity(m.limits, m.rt.cfg.clock)
	a.seed = seedFor(inv.RunID, inv.NodeID, inv.Attempt)
	a.state = inv.State
	a.services = inv.Services
	a.resume = inv.Resume
	if inv.Replay != nil {
		a.replay = inv.Replay.Calls
		if a.replay == nil {
			a.replay = []Call{}
		}
	}
	// The deadline is enforced by wazero's close-on-context-done; a breach
	// seen by the host closes the instance directly, which stops the guest
	// at its next check just the same.
	callCtx, cancelTimeout := context.WithTimeoutCause(ctx, m.limits.Timeout, errTimeout)
	a.deadline, _ = callCtx.Deadline()
	a.stop = func() { _ = inst.mod.CloseWithExitCode(context.Background(), exitBreached) }
	callCtx = context.WithValue(callCtx, stateKey{}, inst.st)
	inst.st.act = a

	res := &Result{Node: m.info.Nodes[idx]}
	reusable := m.call(callCtx, inst, idx, &inv, res)
	cancelTimeout()

	inst.st.act = nil
	res.Duration = time.Since(start)
	res.HostCalls = a.calls
	res.Trace = a.trace
	a.finishReplay(res)
	if a.divergence != nil {
		res.Divergence = a.divergence
		res.fail(abi.CodeReplayDiverged, a.divergence.Error())
	}
	res.MemoryBytes = inst.memoryBytes()
	res.Logs = a.logs
	res.Stdout, res.Stderr = a.stdout.buf, a.stderr.buf
	for _, c := range []struct {
		name string
		c    *capture
	}{{"stdout", &a.stdout}, {"stderr", &a.stderr}, {"logs", &a.logCap}} {
		if c.c.truncated {
			res.Truncated = append(res.Truncated, c.name)
		}
	}
	m.pool.put(inst, reusable)

	// The caller's own cancellation is not a guest outcome.
	if res.Outcome == "" {
		return nil, fmt.Errorf("invoke %s: %w", res.Node, context.Cause(ctx))
	}
	return res, nil
}

// call performs the guest calls of one invocation and fills res. It reports
// whether the instance is still clean enough to reuse.
func (m *Module) call(ctx context.Context, inst *instance, idx int, inv *Invocation, res *Result) bool {
	a := inst.st.act
	bp := reqBufPool.Get().(*[]byte)
	req := abi.AppendRequest((*bp)[:0], &abi.Request{
		ABIVersion: m.info.ABIVersion,
		NodeContext: abi.NodeContext{
			RunID: inv.RunID, NodeID: inv.NodeID, TenantID: inv.TenantID, Attempt: inv.Attempt,
			Configurable: inv.Configurable, Agent: inv.Agent,
		},
		Inputs: inv.Input,
	})
	defer func() { *bp = req; reqBufPool.Put(bp) }()

	if err := inst.reserve(ctx, len(req)); err != nil {
		if ae, ok := err.(*allocError); ok {
			res.fail(abi.CodeAllocFailed, ae.Error())
		} else {
			m.guestError(ctx, a, err, res)
		}
		return false
	}
	mem := inst.mod.Memory()
	mem.Write(inst.reqPtr, req) // in range: checked by reserve
	out, err := inst.invoke.Call(ctx, uint64(idx), uint64(inst.reqPtr), uint64(len(req)))
	if err != nil {
		m.guestError(ctx, a, err, res)
		return false
	}
	if a.breach != nil { // e.g. a refused memory.grow the guest survived
		res.breach(*a.breach)
		return false
	}
	ptr, n := m.enc.invoke.decode(out)
	body, ok := mem.Read(ptr, n)
	if !ok {
		res.fail(abi.CodeResponseOutOfBounds, fmt.Sprintf("response (ptr %#x, len %d) is outside the module's %d-byte memory", ptr, n, mem.Size()))
		return false
	}
	if uint64(n) > m.limits.OutputBytes {
		res.breach(Event{Type: EventCapBreached, Kind: abi.CapOutput, Limit: int64(m.limits.OutputBytes), Observed: int64(n)})
		return false
	}
	resp, err := abi.DecodeResponse(body)
	if err != nil {
		res.fail(responseCode(err), err.Error())
		return false
	}
	res.Outcome, res.Error = resp.Outcome, resp.Error
	// Copy out of guest memory before the instance is freed or reused.
	res.Output = cloneRaw(resp.Output)
	res.Interrupt = cloneRaw(resp.Interrupt)
	res.TaskOutcome = resp.TaskOutcome // decoded: copies already
	if !m.reuse {
		return false // the instance is closed, which frees everything
	}
	// The request buffer stays with the instance for the next invocation.
	_, err = inst.free.Call(ctx, uint64(ptr), uint64(n))
	return err == nil && a.breach == nil
}

// exitBreached is the exit code an instance is closed with when the host
// stops it for a breached limit.
const exitBreached = 0xfffffffe

func cloneRaw(b json.RawMessage) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

func responseCode(err error) string {
	switch {
	case errors.Is(err, abi.ErrResponseUTF8):
		return abi.CodeResponseUTF8
	case errors.Is(err, abi.ErrResponseJSON):
		return abi.CodeResponseJSON
	case errors.Is(err, abi.ErrResponseTaskOutcome):
		return abi.CodeResponseTaskOutcome
	}
	return abi.CodeResponseEnvelope
}

// guestError turns an error from a guest call into an outcome. It leaves
// res.Outcome empty when the caller's own context ended the call.
func (m *Module) guestError(ctx context.Context, a *activity, err error, res *Result) {
	switch cause := context.Cause(ctx); {
	case a.divergence != nil:
		res.fail(abi.CodeReplayDiverged, a.divergence.Error())
	case a.interrupt != nil:
		res.Outcome, res.Interrupt = abi.Suspended, a.interrupt
	case a.breach != nil:
		res.breach(*a.breach)
	case a.failure != nil:
		res.Outcome, res.Error = abi.Failed, a.failure
	case errors.Is(cause, errTimeout):
		started := a.deadline.Add(-m.limits.Timeout)
		res.breach(Event{Type: EventCapBreached, Kind: abi.CapTime, Limit: m.limits.Timeout.Milliseconds(), Observed: time.Since(started).Milliseconds()})
	case ctx.Err() != nil:
		// cancelled by the caller: no outcome
	default:
		var exit *sys.ExitError
		switch {
		case errors.As(err, &exit):
			res.fail(abi.CodeExit, fmt.Sprintf("module called proc_exit(%d)", exit.ExitCode()))
			res.Error.Details = json.RawMessage(fmt.Sprintf(`{"exitCode":%d}`, exit.ExitCode()))
		case strings.Contains(err.Error(), "stack overflow"):
			res.fail(abi.CodeStackExhausted, firstLine(err))
		default:
			res.fail(abi.CodeTrap, firstLine(err))
		}
	}
}

func (r *Result) fail(code, msg string) {
	r.Outcome, r.Error = abi.Failed, &abi.Error{Code: code, Message: msg}
}

func (r *Result) breach(e Event) {
	r.Events = append(r.Events, e)
	r.fail(abi.CodeCapBreached, fmt.Sprintf("%s limit %d exceeded (observed %d)", e.Kind, e.Limit, e.Observed))
}

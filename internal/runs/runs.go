// Package runs is the openwop run scheduler: /v1/runs. A run executes the
// nodes of an openwop workflow definition in order, each through the
// dispatcher as a recorded attempt (attempt 0, as openwop counts) of the
// installed pack that provides its typeId, or in process for a core.*
// type (core.go), asynchronously; its event log
// is the openwop wire log (node.completed with the output, cap.breached
// with the kind). A run outlives the process executing it: Continue
// continues it. The Host (the root package) keeps thin public methods over
// a Scheduler; the dispatcher calls Continue (dispatch.Config.Reclaim).
package runs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/internal/packindex"
	"github.com/packrun/packrun/internal/replay"
	"github.com/packrun/packrun/runtime"
)

// Conformance fixtures built into packrun: each is advertised, and
// runnable, exactly when the packs its nodes need are installed. The
// core ones (openwop's conformance/fixtures, their nodes core.* types
// packrun runs itself) always are; the RFC 0008 ones (§Conformance) need
// the packs of their Wasm nodes.
var openwopFixtures = append([]host.OpenwopWorkflow{
	{WorkflowID: "conformance-noop", Builtin: true, Nodes: []host.OpenwopNode{{ID: "noop", TypeID: CoreNoop}}},
	{WorkflowID: "conformance-idempotent", Builtin: true, Nodes: []host.OpenwopNode{{ID: "noop", TypeID: CoreNoop}},
		Variables: []host.OpenwopVariable{{Name: "nonce", Type: "string", Required: true}}},
	{WorkflowID: "conformance-delay", Builtin: true, Nodes: []host.OpenwopNode{delayNode},
		Variables: []host.OpenwopVariable{{Name: "delayMs", Type: "number", Required: true, DefaultValue: json.RawMessage(`1000`)}}},
	{WorkflowID: "conformance-cancellable", Builtin: true, Nodes: []host.OpenwopNode{delayNode},
		Variables: []host.OpenwopVariable{{Name: "delayMs", Type: "number", Required: true, DefaultValue: json.RawMessage(`30000`)}}},
	{WorkflowID: "conformance-failure", Builtin: true, Nodes: []host.OpenwopNode{{ID: "fail", TypeID: CoreFail}}},
	{WorkflowID: "conformance-cap-breach", Builtin: true, Nodes: []host.OpenwopNode{
		{ID: "n1", TypeID: CoreNoop}, {ID: "n2", TypeID: CoreNoop}, {ID: "n3", TypeID: CoreNoop},
		{ID: "n4", TypeID: CoreNoop}, {ID: "n5", TypeID: CoreNoop}, {ID: "n6", TypeID: CoreNoop}}},
	// Waiting for a person (interrupts.go): always runnable.
	approvalFixture,

	{WorkflowID: "conformance-wasm-pack-roundtrip", Builtin: true, Nodes: []host.OpenwopNode{{ID: "greet", TypeID: "vendor.openwop.rust-hello.greet"}}},
	{WorkflowID: "conformance-wasm-pack-memory-cap-breach", Builtin: true, Nodes: []host.OpenwopNode{{ID: "memory-bomb", TypeID: "vendor.openwop.misbehaving.memory-bomb"}}},
	{WorkflowID: "conformance-wasm-pack-abi-mismatch", Builtin: true, Nodes: []host.OpenwopNode{{ID: "abi-bomb", TypeID: "vendor.openwop.misbehaving.abi-bomb"}}},
}, memoryFixtures...) // openwop's agent memory fixtures (memory.go): always runnable

// delayNode is the node of conformance-delay and -cancellable: core.delay
// for the run's delayMs.
var delayNode = host.OpenwopNode{ID: "wait", TypeID: CoreDelay, Inputs: map[string]host.OpenwopPort{"delayMs": {Type: "variable", VariableName: "delayMs"}}}

// Run error codes.
const (
	// RunErrSuspendNotImplemented: a run whose log records a node's
	// suspension that never reached waiting-approval (written before runs
	// could wait; a suspending node now makes its run wait, interrupts.go)
	// fails with the code openwop's suspend scenario recognises.
	RunErrSuspendNotImplemented = "wasm_suspend_not_implemented"
	RunErrNodeFailed            = "node_failed"
	// MaxRecursionLimit is the largest configurable.recursionLimit taken.
	MaxRecursionLimit = 10000
	// RunErrRecursionLimit: the run would have executed more nodes than
	// its recursionLimit.
	RunErrRecursionLimit = "recursion_limit_exceeded"
	// RunErrReplayFailed: a fork could not replay a recorded attempt (its
	// module or trace is gone).
	RunErrReplayFailed = "replay_failed"
)

// Config configures a Scheduler.
type Config struct {
	// Store holds the runs, their event logs and leases, and the tenants'
	// workflow definitions.
	Store host.Backend
	// Packs says which installed pack provides each node typeId.
	Packs *packindex.Index
	// Invoke runs one node as a recorded attempt (the Host's InvokePack:
	// its checks and defaults, then the dispatcher's Invoke).
	Invoke func(ctx context.Context, req dispatch.InvokeRequest) (*host.Attempt, *runtime.Result, error)
	// Replay replays a recorded attempt, every host call answered from
	// its trace (the Host's Replay, which the evidence chain checks).
	Replay func(ctx context.Context, attemptID string) (*replay.Verdict, error)
	// RunnerID names this process in the runs' leases.
	RunnerID string
	// LeaseTTL is how long a run's lease lasts unless renewed.
	LeaseTTL time.Duration
	// Workers bounds the nodes executing at once (at least 1).
	Workers int
	// Log receives what went wrong in the background.
	Log hclog.Logger
}

// Scheduler executes openwop runs in this process and tracks them, to
// cancel and wait for them.
type Scheduler struct {
	cfg     Config
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
	wg      sync.WaitGroup
	closed  bool // Stop has run: nothing more starts
	// slots bounds the nodes executing at once (nodeSlot).
	slots chan struct{}
	// stopKeeper stops keepRuns, started with the first run (nil before),
	// and waits until it returned.
	stopKeeper func()
	// queued holds what runs next for a run executing here (start).
	queued map[string]func(context.Context)
}

// New returns a Scheduler executing nothing yet.
func New(cfg Config) *Scheduler {
	if cfg.Log == nil {
		cfg.Log = hclog.NewNullLogger()
	}
	return &Scheduler{cfg: cfg, slots: make(chan struct{}, max(cfg.Workers, 1))}
}

// nodeSlot waits for one of the host's slots for executing an openwop
// run's node (Config.Workers nodes at once, beside the dispatcher's
// tasks), so that however many runs are started or continued, the Wasm
// instances they hold at once are bounded; a run waiting for a slot stays
// running, its lease renewed. It returns the slot's release, or false
// when ctx ended first.
func (s *Scheduler) nodeSlot(ctx context.Context) (release func(), ok bool) {
	select {
	case s.slots <- struct{}{}:
		return func() { <-s.slots }, true
	case <-ctx.Done():
		return nil, false
	}
}

// holdRun makes r this host's for a lease: set before the run is created.
func (s *Scheduler) holdRun(r *host.Run) {
	r.Holder, r.LeaseUntil = s.cfg.RunnerID, time.Now().Add(s.cfg.LeaseTTL)
}

// keepRuns renews the leases of the runs this host holds every third of
// a lease, while any executes here, until ctx is done.
func (s *Scheduler) keepRuns(ctx context.Context) {
	failing := false
	t := time.NewTicker(max(s.cfg.LeaseTTL/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.mu.Lock()
		n := len(s.cancels)
		s.mu.Unlock()
		if n == 0 {
			continue
		}
		_, err := s.cfg.Store.RenewRuns(ctx, s.cfg.RunnerID, time.Now().Add(s.cfg.LeaseTTL))
		switch {
		case ctx.Err() != nil:
		case err != nil && !failing:
			s.cfg.Log.Error("renewing the openwop runs' leases failed; trying again", "err", err)
		}
		failing = err != nil
	}
}

// PutOpenwopWorkflow registers (or replaces) a tenant's openwop workflow
// definition. A built-in fixture's id cannot be taken.
func (s *Scheduler) PutOpenwopWorkflow(ctx context.Context, w *host.OpenwopWorkflow) error {
	if fixtureOf(w.WorkflowID) != nil {
		return host.Errorf("put openwop workflow", w.WorkflowID, host.ErrConflict, "is a built-in conformance fixture")
	}
	w.Builtin = false
	return s.cfg.Store.PutOpenwopWorkflow(ctx, w)
}

func fixtureOf(id string) *host.OpenwopWorkflow {
	for i := range openwopFixtures {
		if openwopFixtures[i].WorkflowID == id {
			return &openwopFixtures[i]
		}
	}
	return nil
}

// providers maps each installed node typeId to the name of an installed
// pack providing it (InvokePack runs its newest version).
func (s *Scheduler) providers(ctx context.Context) (map[string]string, error) {
	infos, err := s.cfg.Packs.PackInfos(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, t := range builtinNodes {
		m[t] = builtinPack
	}
	for _, p := range infos {
		for _, n := range p.Nodes {
			m[n] = p.Name // several packs: the last listed wins
		}
	}
	return m, nil
}

// OpenwopFixtures lists the built-in conformance fixtures whose nodes'
// packs are all installed (discovery's "fixtures").
func (s *Scheduler) OpenwopFixtures(ctx context.Context) ([]string, error) {
	prov, err := s.providers(ctx)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, f := range openwopFixtures {
		if _, err := resolveNodes(&f, prov); err == nil {
			out = append(out, f.WorkflowID)
		}
	}
	return out, nil
}

// OpenwopRegistered lists the ids of the tenant's registered workflow
// definitions whose nodes are all runnable here (core types, or provided
// by installed packs): discovery's "fixtures" to a caller of the tenant.
func (s *Scheduler) OpenwopRegistered(ctx context.Context, tenant string) ([]string, error) {
	prov, err := s.providers(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := s.cfg.Store.OpenwopWorkflows(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []string{}
	for _, w := range ws {
		if _, err := resolveNodes(w, prov); err == nil {
			out = append(out, w.WorkflowID)
		}
	}
	return out, nil
}

// resolveNodes names the pack of each node of w, or refuses the workflow
// naming the first node no installed pack provides.
func resolveNodes(w *host.OpenwopWorkflow, prov map[string]string) ([]string, error) {
	refs := make([]string, len(w.Nodes))
	for i, n := range w.Nodes {
		if isCore(n.TypeID) {
			continue // run by packrun: no pack
		}
		ref, ok := prov[n.TypeID]
		if !ok {
			return nil, host.Invalid("start run", "workflowId", "node %q needs %s, which no installed pack provides", n.ID, n.TypeID)
		}
		refs[i] = ref
	}
	return refs, nil
}

func (s *Scheduler) openwopWorkflow(ctx context.Context, tenant, id string) (*host.OpenwopWorkflow, error) {
	if f := fixtureOf(id); f != nil {
		return f, nil
	}
	return s.cfg.Store.OpenwopWorkflow(ctx, tenant, id)
}

// StartRun creates a run of workflowID with inputs (a JSON object; left
// out or null is {}) and executes it in the background. A workflow whose nodes are
// not all provided by installed packs is refused (host.ErrInvalid).
func (s *Scheduler) StartRun(ctx context.Context, tenant, workflowID string, inputs json.RawMessage) (*host.Run, error) {
	r, _, err := s.StartRunOnce(ctx, tenant, workflowID, inputs, "")
	return r, err
}

// StartRunOnce is StartRun under the tenant's Idempotency-Key key (none
// if ""): the same key with the same workflowId and inputs (compared as
// compact JSON) within host.RunIdempotencyTTL answers the run it started
// and false; with others, host.ErrIdempotencyMismatch.
func (s *Scheduler) StartRunOnce(ctx context.Context, tenant, workflowID string, inputs json.RawMessage, key string) (*host.Run, bool, error) {
	return s.StartRunWith(ctx, tenant, workflowID, inputs, key, host.RunOptions{})
}

// StartRunWith is StartRunOnce with a run's options; options other than
// none are part of what the Idempotency-Key compares.
func (s *Scheduler) StartRunWith(ctx context.Context, tenant, workflowID string, inputs json.RawMessage, key string, opts host.RunOptions) (*host.Run, bool, error) {
	if opts.RecursionLimit < 0 || opts.RecursionLimit > MaxRecursionLimit {
		return nil, false, host.Invalid("start run", "configurable.recursionLimit", "must be an integer from 1 to %d", MaxRecursionLimit)
	}
	r, w, refs, err := s.newRun(ctx, tenant, workflowID, inputs)
	if err != nil {
		return nil, false, err
	}
	r.RecursionLimit = opts.RecursionLimit
	evs := []host.RunEvent{runEvent(host.RunEventStarted, "", map[string]any{"workflowId": w.WorkflowID})}
	created := true
	if key == "" {
		err = s.cfg.Store.CreateRun(ctx, r, evs)
	} else {
		var c bytes.Buffer
		if err := json.Compact(&c, r.Inputs); err != nil { // r.Inputs decoded as an object in newRun
			return nil, false, err
		}
		req := w.WorkflowID + "\n" + c.String()
		if opts != (host.RunOptions{}) {
			req += fmt.Sprintf("\nrecursionLimit=%d", opts.RecursionLimit)
		}
		d := sha256.Sum256([]byte(req))
		var got *host.Run
		got, created, err = s.cfg.Store.CreateRunOnce(ctx, r, evs, host.RunIdempotency{Key: key, Digest: hex.EncodeToString(d[:]), TTL: host.RunIdempotencyTTL})
		if err == nil && !created {
			return got, false, nil
		}
	}
	if err != nil {
		return nil, false, err
	}
	s.spawn(r, func(ctx context.Context) { s.execute(ctx, r, w, refs, progress{}) })
	return r, created, nil
}

// newRun checks a run request and makes its run, held by this runner.
func (s *Scheduler) newRun(ctx context.Context, tenant, workflowID string, inputs json.RawMessage) (*host.Run, *host.OpenwopWorkflow, []string, error) {
	const op = "start run"
	if len(inputs) == 0 || string(inputs) == "null" {
		inputs = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(inputs, &obj) != nil || obj == nil {
		return nil, nil, nil, host.Invalid(op, "inputs", "must be a JSON object")
	}
	if workflowID == "" {
		return nil, nil, nil, host.Invalid(op, "workflowId", "is required")
	}
	w, err := s.openwopWorkflow(ctx, tenant, workflowID)
	if err != nil {
		return nil, nil, nil, err
	}
	prov, err := s.providers(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	refs, err := resolveNodes(w, prov)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := runInputs(op, w, obj); err != nil {
		return nil, nil, nil, err
	}
	if len(w.Variables) > 0 {
		if inputs, err = json.Marshal(obj); err != nil {
			return nil, nil, nil, err
		}
	}
	r := &host.Run{RunID: host.NewID("run"), Tenant: tenant, WorkflowID: w.WorkflowID, Status: host.RunRunning, Inputs: inputs}
	s.holdRun(r)
	return r, w, refs, nil
}

// GetRun returns a tenant's run (with the node it waits on, if it waits).
func (s *Scheduler) GetRun(ctx context.Context, tenant, runID string) (*host.Run, error) {
	r, err := s.cfg.Store.Run(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	if r, err = s.withVariables(ctx, r); err != nil {
		return nil, err
	}
	return s.withCurrentNode(ctx, r)
}

// RunEvents returns a tenant's run's event log.
func (s *Scheduler) RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error) {
	return s.cfg.Store.RunEvents(ctx, tenant, runID)
}

// CancelRun cancels a running run (ErrConflict once it is terminal) and
// stops the node it is executing.
func (s *Scheduler) CancelRun(ctx context.Context, tenant, runID, reason string) (*host.Run, error) {
	r, err := s.cfg.Store.AdvanceRun(ctx, tenant, runID, "", host.RunCancelled, nil, []host.RunEvent{runEvent(host.RunEventCancelled, "", map[string]any{"reason": reason})})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if cancel := s.cancels[runID]; cancel != nil {
		cancel()
	}
	s.mu.Unlock()
	return r, nil
}

// ForkRun forks a terminal run as openwop's replay spec (spec/v1/replay.md)
// describes mode "replay": the new run takes the source's events before
// fromSeq as fixed history (copied) and re-executes each node completed at
// or after it by replaying its recorded attempt, every host call answered
// from the trace. A replay that differs emits replay.diverged and the run
// carries on with what the replay produced (the spec's divergence is
// informational). Mode "branch" is not served.
func (s *Scheduler) ForkRun(ctx context.Context, tenant, runID, mode string, fromSeq int) (*host.Run, error) {
	const op = "fork run"
	if mode != "replay" {
		return nil, host.Invalid(op, "mode", "must be \"replay\" (branch is not served)")
	}
	if fromSeq < 0 {
		return nil, host.Invalid(op, "fromSeq", "must be 0 or more")
	}
	src, err := s.cfg.Store.Run(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	if !host.RunTerminal(src.Status) {
		return nil, host.Errorf(op, runID, host.ErrConflict, "the run is still %s", src.Status)
	}
	evs, err := s.cfg.Store.RunEvents(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	if fromSeq > len(evs) {
		e := host.Errorf(op, runID, host.ErrOutOfRange, "fromSeq %d is past the end: the run has %d events", fromSeq, len(evs))
		e.Field = "fromSeq"
		return nil, e
	}
	r := &host.Run{RunID: host.NewID("run"), Tenant: tenant, WorkflowID: src.WorkflowID, Status: host.RunRunning, Inputs: src.Inputs, ForkedFrom: src.RunID, Mode: mode, FromSeq: fromSeq}
	s.holdRun(r)
	first := []host.RunEvent{runEvent(host.RunEventStarted, "", map[string]any{"workflowId": src.WorkflowID, "sourceRunId": src.RunID, "mode": mode, "fromSeq": fromSeq})}
	for _, e := range evs[:max(fromSeq-1, 0)] { // fixed history (the source's run.started is replaced)
		if e.Type != host.RunEventStarted {
			first = append(first, host.RunEvent{Type: e.Type, NodeID: e.NodeID, Payload: e.Payload})
		}
	}
	if err := s.cfg.Store.CreateRun(ctx, r, first); err != nil {
		return nil, err
	}
	s.spawn(r, func(ctx context.Context) { s.replayRun(ctx, r, evs[max(fromSeq-1, 0):]) })
	return r, nil
}

// spawn runs fn for r in the background, cancellable by CancelRun and
// waited for by Close. A run this process already executes is not started
// twice, and nothing starts once the host is closing (the run stays
// running, for the next start to continue).
func (s *Scheduler) spawn(r *host.Run, fn func(ctx context.Context)) {
	s.start(r, fn, false)
}

// start is spawn; with queue, fn for a run this process still executes
// (its execution winding down) runs once that ends instead of not at all.
func (s *Scheduler) start(r *host.Run, fn func(ctx context.Context), queue bool) {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	if s.cancels == nil {
		s.cancels, s.queued = map[string]context.CancelFunc{}, map[string]func(context.Context){}
	}
	if s.closed || s.cancels[r.RunID] != nil {
		if queue && !s.closed {
			s.queued[r.RunID] = fn
		}
		s.mu.Unlock()
		cancel()
		return
	}
	s.cancels[r.RunID] = cancel
	s.wg.Add(1)
	if s.stopKeeper == nil {
		keep, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		s.stopKeeper = func() { stop(); <-done }
		go func() { defer close(done); s.keepRuns(keep) }()
	}
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.cancels, r.RunID)
			next := s.queued[r.RunID]
			delete(s.queued, r.RunID)
			s.mu.Unlock()
			cancel()
			if next != nil {
				s.spawn(r, next)
			}
		}()
		fn(ctx)
	}()
}

// Stop cancels every run executing here and waits for them. The runs
// are left running: the next dispatcher to take the store's dispatch lock
// continues them (Continue).
func (s *Scheduler) Stop() {
	s.mu.Lock()
	s.closed = true
	for _, c := range s.cancels {
		c()
	}
	stopKeeper := s.stopKeeper
	s.mu.Unlock()
	s.wg.Wait()
	if stopKeeper != nil {
		stopKeeper() // no renewal in flight can extend the leases let go below
		// Let the runs left go at once: the next runner need not wait for
		// their leases to run out.
		if _, err := s.cfg.Store.RenewRuns(context.Background(), s.cfg.RunnerID, time.Time{}); err != nil {
			s.cfg.Log.Error("letting go of the openwop runs' leases", "err", err)
		}
	}
}

// execute runs w's nodes in order, skipping those p records as completed
// (their outputs are kept); a node's attempt is numbered from the attempts
// p records started for it, 0 first. Every step is an AdvanceRun, which
// refuses once the run is terminal (cancelled): the run then stops. A node
// cut short because the run's context ended (cancelled, or the host is
// closing) ends nothing: a cancelled run already is, a run of a closing
// host stays running and is continued by the next start.
func (s *Scheduler) execute(ctx context.Context, r *host.Run, w *host.OpenwopWorkflow, refs []string, p progress) {
	outputs := map[string]json.RawMessage{}
	executed := p.executions() // every attempt started, a node run again after an interrupt included
	for i, n := range w.Nodes {
		if out, done := p.outputs[n.ID]; done {
			outputs[n.ID] = out
			continue
		}
		executed++
		if r.RecursionLimit > 0 && executed > r.RecursionLimit {
			s.advance(ctx, r, "", nil, runEvent(host.RunEventCapBreached, n.ID, map[string]any{"nodeId": n.ID, "kind": "node-executions", "limit": r.RecursionLimit, "observed": executed}))
			s.fail(ctx, r, n, &host.RunError{Code: RunErrRecursionLimit, Message: fmt.Sprintf("node %s would be node execution %d, over the run's recursionLimit %d", n.ID, executed, r.RecursionLimit)})
			return
		}
		attempt := p.started[n.ID]
		if isCore(n.TypeID) {
			out, ok := s.executeCore(ctx, r, n, attempt)
			if !ok {
				return
			}
			outputs[n.ID] = out
			continue
		}
		release, ok := s.nodeSlot(ctx)
		if !ok {
			return
		}
		if !s.advance(ctx, r, "", nil, runEvent(host.RunEventNodeStarted, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "pack": refs[i], "attempt": attempt})) {
			release()
			return
		}
		attemptID, res, err := s.invokeNode(ctx, r, n, refs[i], attempt, p.resume[n.ID])
		release()
		if ctx.Err() != nil && (err != nil || res.Outcome != abi.Completed) {
			return
		}
		if err != nil {
			s.fail(ctx, r, n, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s: %v", n.ID, err)})
			return
		}
		evs := breaches(n.ID, attemptID, res)
		switch res.Outcome {
		case abi.Completed:
			outputs[n.ID] = res.Output
			evs = append(evs, runEvent(host.RunEventNodeDone, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "attemptId": attemptID, "output": res.Output}))
			if !s.advance(ctx, r, "", nil, evs...) {
				return
			}
			continue
		case abi.Suspended:
			s.suspend(ctx, r, n, attemptID, res, p, evs)
			return
		}
		rerr := &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s %s", n.ID, res.Outcome)}
		if res.Error != nil {
			rerr.Message += ": " + res.Error.Code + ": " + res.Error.Message
		}
		evs = append(evs, runEvent(host.RunEventNodeFailed, n.ID, map[string]any{"nodeId": n.ID, "attemptId": attemptID, "error": res.Error}))
		s.advance(ctx, r, "", nil, evs...)
		s.fail(ctx, r, n, rerr)
		return
	}
	s.advance(ctx, r, host.RunCompleted, nil, runEvent(host.RunEventCompleted, "", map[string]any{"outputs": outputs}))
}

// executeCore runs the core node n of r as execute runs a pack's: its
// node.started, then node.completed with its output, or node.failed and
// the run failed (false). False also when the run's context ended.
func (s *Scheduler) executeCore(ctx context.Context, r *host.Run, n host.OpenwopNode, attempt int) (json.RawMessage, bool) {
	if !s.advance(ctx, r, "", nil, runEvent(host.RunEventNodeStarted, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "attempt": attempt})) {
		return nil, false
	}
	var out json.RawMessage
	var fail *coreError
	ok := true
	if isMemoryNode(n.TypeID) {
		out, fail = s.runMemory(ctx, r, n, nodeInput(n, r.Inputs))
	} else if out, fail, ok = runCore(ctx, n.TypeID, nodeInput(n, r.Inputs)); !ok {
		return nil, false
	}
	if fail != nil {
		s.advance(ctx, r, "", nil, runEvent(host.RunEventNodeFailed, n.ID, map[string]any{"nodeId": n.ID, "error": fail}))
		s.fail(ctx, r, n, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s failed: %s: %s", n.ID, fail.Code, fail.Message)})
		return nil, false
	}
	return out, s.advance(ctx, r, "", nil, runEvent(host.RunEventNodeDone, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "output": out}))
}

// suspendError is why a run whose node n suspended fails.
func suspendError(n host.OpenwopNode) *host.RunError {
	return &host.RunError{Code: RunErrSuspendNotImplemented, Message: "node " + n.ID + " suspended; resuming an openwop run is not implemented"}
}

// breaches are the cap.breached events of an attempt.
func breaches(nodeID, attemptID string, res *runtime.Result) []host.RunEvent {
	var evs []host.RunEvent
	for _, e := range res.Events {
		if e.Type == runtime.EventCapBreached {
			evs = append(evs, runEvent(host.RunEventCapBreached, nodeID, map[string]any{"nodeId": nodeID, "attemptId": attemptID, "kind": e.Kind, "limit": e.Limit, "observed": e.Observed}))
		}
	}
	return evs
}

// replayRun replays the attempts recorded by the node.completed events of
// src, in order; the run ends as the last replayed node did.
func (s *Scheduler) replayRun(ctx context.Context, r *host.Run, src []host.RunEvent) {
	for _, e := range src {
		if e.Type != host.RunEventNodeDone {
			continue
		}
		var p struct {
			NodeID    string          `json:"nodeId"`
			TypeID    string          `json:"typeId"`
			AttemptID string          `json:"attemptId"`
			Output    json.RawMessage `json:"output"`
		}
		_ = json.Unmarshal(e.Payload, &p) // written by this package (runEvent above), stored as written
		n := host.OpenwopNode{ID: p.NodeID, TypeID: p.TypeID}
		if isCore(n.TypeID) || slices.Contains(builtinNodes, n.TypeID) { // no attempt recorded: its output stands
			if !s.advance(ctx, r, "", nil, runEvent(host.RunEventNodeDone, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "replayed": true, "output": p.Output})) {
				return
			}
			continue
		}
		release, ok := s.nodeSlot(ctx)
		if !ok {
			return // cancelled, or left running for the next start
		}
		v, err := s.cfg.Replay(ctx, p.AttemptID)
		release()
		if ctx.Err() != nil && (err != nil || v.Got.Outcome != abi.Completed) {
			return // cancelled, or left running for the next start
		}
		if err != nil {
			s.fail(ctx, r, n, &host.RunError{Code: RunErrReplayFailed, Message: fmt.Sprintf("node %s: replay of attempt %s: %v", n.ID, p.AttemptID, err)})
			return
		}
		var evs []host.RunEvent
		if !v.Identical {
			evs = append(evs, runEvent(host.RunEventReplayDiverged, n.ID, map[string]any{
				"originalEventId": fmt.Sprintf("%s/%d", r.ForkedFrom, e.Seq), "divergencePoint": e.Seq, "nodeId": n.ID, "attemptId": p.AttemptID,
				"divergence": v.Divergence, "difference": v.Difference}))
		}
		if v.Got.Outcome != abi.Completed {
			evs = append(evs, runEvent(host.RunEventNodeFailed, n.ID, map[string]any{"nodeId": n.ID, "attemptId": p.AttemptID, "replayed": true, "error": v.Got.Error}))
			s.advance(ctx, r, "", nil, evs...)
			s.fail(ctx, r, n, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s %s on replay", n.ID, v.Got.Outcome)})
			return
		}
		evs = append(evs, runEvent(host.RunEventNodeDone, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "attemptId": p.AttemptID, "replayed": true, "output": v.Got.Output}))
		if !s.advance(ctx, r, "", nil, evs...) {
			return
		}
	}
	s.advance(ctx, r, host.RunCompleted, nil, runEvent(host.RunEventCompleted, "", map[string]any{"sourceRunId": r.ForkedFrom}))
}

// fail ends r as failed because of node n.
func (s *Scheduler) fail(ctx context.Context, r *host.Run, n host.OpenwopNode, rerr *host.RunError) {
	s.advance(ctx, r, host.RunFailed, rerr, runEvent(host.RunEventFailed, "", map[string]any{"nodeId": n.ID, "error": rerr}))
}

// advance appends evs (and a status) to r; false means the run is over
// here: cancelled, taken over by another runner (this one's lease ran
// out while it stalled), or the store failed (logged; the run is left as
// it is, for its lease to run out and a runner to continue it).
func (s *Scheduler) advance(ctx context.Context, r *host.Run, status string, rerr *host.RunError, evs ...host.RunEvent) bool {
	// The store write must happen even when ctx was cancelled by
	// CancelRun: the run's own record then refuses it (ErrConflict).
	_, err := s.cfg.Store.AdvanceRun(context.WithoutCancel(ctx), r.Tenant, r.RunID, s.cfg.RunnerID, status, rerr, evs)
	switch {
	case errors.Is(err, host.ErrConflict):
		s.cfg.Log.Info("openwop run stopped here", "run", r.RunID, "why", err)
	case err != nil:
		s.cfg.Log.Error("openwop run", "run", r.RunID, "err", err)
	}
	return err == nil && ctx.Err() == nil
}

func runEvent(typ, nodeID string, payload map[string]any) host.RunEvent {
	b, _ := json.Marshal(payload)
	return host.RunEvent{Type: typ, NodeID: nodeID, Payload: b}
}

// OpenwopLoadedPacks lists the installed packs' names, sorted, once
// each (discovery's loadedPacks): a pack is installed only after its
// module loaded, so one the host refuses is never listed.
func (s *Scheduler) OpenwopLoadedPacks(ctx context.Context) ([]string, error) {
	infos, err := s.cfg.Packs.PackInfos(ctx)
	if err != nil {
		return nil, err
	}
	names := []string{}
	for _, p := range infos {
		if !slices.Contains(names, p.Name) {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// Continuing openwop runs after a restart. A run is left running when the
// process executing it stops, cleanly (Close) or not (a crash, SIGKILL).
// The dispatcher that next takes the store's dispatch lock continues every
// such run from its event log: nodes with a node.completed event are not
// run again, and the node that was in flight is run again as its next
// attempt, after a run.resumed event saying so.

// ResumeReason is the reason a run.resumed event gives: the process that
// executed the run stopped before the run ended.
const ResumeReason = "host_restarted"

// progress is what a run's event log says it has done.
type progress struct {
	// outputs are the completed nodes' outputs, by node id.
	outputs map[string]json.RawMessage
	// started counts the attempts started per node id: the next attempt's
	// number (openwop counts from 0).
	started map[string]int
	// ended names the node whose node.failed or node.suspended event was
	// recorded (the run ends failed, unless a resolution of its interrupt
	// follows), with that event's type.
	ended, endedType string
	// resume are the resumeValues a node's interrupts were resolved with,
	// oldest first, by node id.
	resume map[string][]json.RawMessage
}

// progressOf reads a run's event log.
func progressOf(evs []host.RunEvent) progress {
	p := progress{outputs: map[string]json.RawMessage{}, started: map[string]int{}, resume: map[string][]json.RawMessage{}}
	for _, e := range evs {
		switch e.Type {
		case host.RunEventNodeStarted:
			p.started[e.NodeID]++
		case host.RunEventNodeDone:
			var v struct {
				Output json.RawMessage `json:"output"`
			}
			_ = json.Unmarshal(e.Payload, &v) // written by this package (runEvent), stored as written
			p.outputs[e.NodeID] = v.Output
		case host.RunEventNodeFailed, host.RunEventNodeSuspend:
			p.ended, p.endedType = e.NodeID, e.Type
		case host.RunEventApprovalReceived, host.RunEventInterruptResolved:
			var v struct {
				ResumeValue json.RawMessage `json:"resumeValue"`
			}
			_ = json.Unmarshal(e.Payload, &v) // written by ResolveInterrupt, stored as written
			p.resume[e.NodeID] = append(p.resume[e.NodeID], v.ResumeValue)
			if p.ended == e.NodeID {
				p.ended, p.endedType = "", ""
			}
		}
	}
	return p
}

// Continue claims, and continues in the background, the runs a
// stopped or stalled runner left: every run not terminal when alone (the
// dispatcher holds the store's dispatch lock: whoever ran them stopped),
// else those whose lease ran out (several nodes on one store: the
// dispatcher calls this at start and every half lease). A claimed run is
// this host's: the runner it was taken from has its next advance refused.
func (s *Scheduler) Continue(ctx context.Context, alone bool) {
	expired := time.Now()
	if alone {
		expired = host.ClaimEveryRun
	}
	runs, err := s.cfg.Store.ClaimRuns(ctx, s.cfg.RunnerID, expired, time.Now().Add(s.cfg.LeaseTTL))
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Error("continue openwop runs", "err", err)
		}
		return
	}
	// A run this process executes already (started between its CreateRun
	// and its spawn, or its own lease ran out while it stalled) is not
	// started twice: spawn refuses. A run claimed in the instant between
	// its CreateRun and its spawn then executes once, after a run.resumed
	// naming attempt 0.
	for _, r := range runs {
		s.spawn(r, func(ctx context.Context) { s.continueRun(ctx, r) })
	}
	if len(runs) > 0 {
		s.cfg.Log.Info("continuing openwop runs left running", "count", len(runs))
	}
}

// continueRun continues r from its event log. The claim that handed r
// over may predate the end of this process's own execution of it (claimed
// while it ran, spawned once that execution had returned): r is read
// again, and a run that since ended or waits on an interrupt is left as
// it is, not ended as if its node's suspension had been cut short.
func (s *Scheduler) continueRun(ctx context.Context, r *host.Run) {
	now, err := s.cfg.Store.Run(ctx, r.Tenant, r.RunID)
	if err != nil {
		s.cfg.Log.Error("continue openwop run", "run", r.RunID, "err", err)
		return
	}
	if host.RunTerminal(now.Status) || now.Status == host.RunWaitingApproval {
		return
	}
	evs, err := s.cfg.Store.RunEvents(ctx, r.Tenant, r.RunID)
	if err != nil {
		s.cfg.Log.Error("continue openwop run", "run", r.RunID, "err", err)
		return
	}
	p := progressOf(evs)
	if r.ForkedFrom != "" {
		s.continueFork(ctx, r, p)
		return
	}
	w, err := s.openwopWorkflow(ctx, r.Tenant, r.WorkflowID)
	if err != nil {
		s.fail(ctx, r, host.OpenwopNode{}, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("continuing the run: %v", err)})
		return
	}
	next := nextNode(w, p)
	if p.ended != "" {
		s.endFailed(ctx, r, host.OpenwopNode{ID: p.ended}, p.endedType)
		return
	}
	prov, err := s.providers(ctx)
	if err != nil {
		s.cfg.Log.Error("continue openwop run", "run", r.RunID, "err", err)
		return
	}
	refs, err := resolveNodes(w, prov)
	if err != nil {
		s.fail(ctx, r, next, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("continuing the run: %v", err)})
		return
	}
	resumed := map[string]any{"reason": ResumeReason}
	if next.ID != "" { // a node is left to run
		resumed["nodeId"], resumed["attempt"], resumed["interrupted"] = next.ID, p.started[next.ID], p.started[next.ID] > 0
	}
	if !s.advance(ctx, r, "", nil, runEvent(host.RunEventResumed, next.ID, resumed)) {
		return
	}
	s.execute(ctx, r, w, refs, p)
}

// nextNode is w's first node p does not record as completed (none once
// all are).
func nextNode(w *host.OpenwopWorkflow, p progress) host.OpenwopNode {
	for _, n := range w.Nodes {
		if _, done := p.outputs[n.ID]; !done {
			return n
		}
	}
	return host.OpenwopNode{}
}

// endFailed ends a run whose node failed or suspended (its event was
// recorded) before the process stopped, as execute would have.
func (s *Scheduler) endFailed(ctx context.Context, r *host.Run, n host.OpenwopNode, evType string) {
	rerr := &host.RunError{Code: RunErrNodeFailed, Message: "node " + n.ID + " failed"}
	if evType == host.RunEventNodeSuspend {
		rerr = suspendError(n)
	}
	s.fail(ctx, r, n, rerr)
}

// continueFork continues a :fork replay: the source's nodes from fromSeq
// on that the fork has not completed are replayed.
func (s *Scheduler) continueFork(ctx context.Context, r *host.Run, p progress) {
	src, err := s.cfg.Store.RunEvents(ctx, r.Tenant, r.ForkedFrom)
	if err != nil {
		s.fail(ctx, r, host.OpenwopNode{}, &host.RunError{Code: RunErrReplayFailed, Message: fmt.Sprintf("continuing the fork: %v", err)})
		return
	}
	var todo []host.RunEvent
	for _, e := range src[min(max(r.FromSeq-1, 0), len(src)):] {
		if _, done := p.outputs[e.NodeID]; e.Type != host.RunEventNodeDone || !done {
			todo = append(todo, e)
		}
	}
	if p.ended != "" {
		s.fail(ctx, r, host.OpenwopNode{ID: p.ended}, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s failed on replay", p.ended)})
		return
	}
	if !s.advance(ctx, r, "", nil, runEvent(host.RunEventResumed, "", map[string]any{"reason": ResumeReason})) {
		return
	}
	s.replayRun(ctx, r, todo)
}

// executions counts the node executions p records: every attempt started.
func (p progress) executions() int {
	n := 0
	for _, c := range p.started {
		n += c
	}
	return n
}

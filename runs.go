package packrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/runtime"
)

// openwop runs: `packrun serve`'s /v1/runs. A run executes the nodes of an
// openwop workflow definition in order, each through the dispatcher as a
// recorded attempt (attempt 0, as openwop counts) of the installed pack
// that provides its typeId, asynchronously; its event log is the openwop
// wire log (node.completed with the output, cap.breached with the kind). A
// run outlives the process executing it: runs_resume.go continues it.

// Conformance fixtures (RFC 0008 §Conformance) built into packrun: each is
// advertised, and runnable, exactly when the packs its nodes need are
// installed.
var openwopFixtures = []host.OpenwopWorkflow{
	{WorkflowID: "conformance-wasm-pack-roundtrip", Builtin: true, Nodes: []host.OpenwopNode{{ID: "greet", TypeID: "vendor.openwop.rust-hello.greet"}}},
	{WorkflowID: "conformance-wasm-pack-memory-cap-breach", Builtin: true, Nodes: []host.OpenwopNode{{ID: "memory-bomb", TypeID: "vendor.openwop.misbehaving.memory-bomb"}}},
	{WorkflowID: "conformance-wasm-pack-abi-mismatch", Builtin: true, Nodes: []host.OpenwopNode{{ID: "abi-bomb", TypeID: "vendor.openwop.misbehaving.abi-bomb"}}},
}

// Run error codes.
const (
	// RunErrSuspendNotImplemented: a node suspended (openwop_interrupt or
	// outcome "suspended"); runs cannot be resumed yet, so the run fails
	// with the code openwop's suspend scenario recognises.
	RunErrSuspendNotImplemented = "wasm_suspend_not_implemented"
	RunErrNodeFailed            = "node_failed"
	// RunErrReplayFailed: a fork could not replay a recorded attempt (its
	// module or trace is gone).
	RunErrReplayFailed = "replay_failed"
)

// runSet tracks the runs executing in this process, to cancel and wait for
// them.
type runSet struct {
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
	wg      sync.WaitGroup
	closed  bool // stopRuns has run: nothing more starts
	// slots bounds the nodes executing at once (nodeSlot).
	slots chan struct{}
	// stopKeeper stops keepRuns, started with the first run (nil before),
	// and waits until it returned.
	stopKeeper func()
}

// nodeSlot waits for one of the host's slots for executing an openwop
// run's node (Config.Workers nodes at once, beside the dispatcher's
// tasks), so that however many runs are started or continued, the Wasm
// instances they hold at once are bounded; a run waiting for a slot stays
// running, its lease renewed. It returns the slot's release, or false
// when ctx ended first.
func (h *Host) nodeSlot(ctx context.Context) (release func(), ok bool) {
	select {
	case h.runs.slots <- struct{}{}:
		return func() { <-h.runs.slots }, true
	case <-ctx.Done():
		return nil, false
	}
}

// holdRun makes r this host's for a lease: set before the run is created.
func (h *Host) holdRun(r *host.Run) {
	r.Holder, r.LeaseUntil = h.cfg.RunnerID, time.Now().Add(h.cfg.LeaseTTL)
}

// keepRuns renews the leases of the runs this host holds every third of
// a lease, while any executes here, until ctx is done.
func (h *Host) keepRuns(ctx context.Context) {
	failing := false
	t := time.NewTicker(max(h.cfg.LeaseTTL/3, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		h.runs.mu.Lock()
		n := len(h.runs.cancels)
		h.runs.mu.Unlock()
		if n == 0 {
			continue
		}
		_, err := h.store.RenewRuns(ctx, h.cfg.RunnerID, time.Now().Add(h.cfg.LeaseTTL))
		switch {
		case ctx.Err() != nil:
		case err != nil && !failing:
			h.log.Error("renewing the openwop runs' leases failed; trying again", "err", err)
		}
		failing = err != nil
	}
}

// PutOpenwopWorkflow registers (or replaces) a tenant's openwop workflow
// definition. A built-in fixture's id cannot be taken.
func (h *Host) PutOpenwopWorkflow(ctx context.Context, w *host.OpenwopWorkflow) error {
	if fixtureOf(w.WorkflowID) != nil {
		return host.Errorf("put openwop workflow", w.WorkflowID, host.ErrConflict, "is a built-in conformance fixture")
	}
	w.Builtin = false
	return h.store.PutOpenwopWorkflow(ctx, w)
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
func (h *Host) providers(ctx context.Context) (map[string]string, error) {
	infos, err := h.index.PackInfos(ctx)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, p := range infos {
		for _, n := range p.Nodes {
			m[n] = p.Name // several packs: the last listed wins
		}
	}
	return m, nil
}

// OpenwopFixtures lists the built-in conformance fixtures whose nodes'
// packs are all installed (discovery's "fixtures").
func (h *Host) OpenwopFixtures(ctx context.Context) ([]string, error) {
	prov, err := h.providers(ctx)
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

// resolveNodes names the pack of each node of w, or refuses the workflow
// naming the first node no installed pack provides.
func resolveNodes(w *host.OpenwopWorkflow, prov map[string]string) ([]string, error) {
	refs := make([]string, len(w.Nodes))
	for i, n := range w.Nodes {
		ref, ok := prov[n.TypeID]
		if !ok {
			return nil, host.Invalid("start run", "workflowId", "node %q needs %s, which no installed pack provides", n.ID, n.TypeID)
		}
		refs[i] = ref
	}
	return refs, nil
}

func (h *Host) openwopWorkflow(ctx context.Context, tenant, id string) (*host.OpenwopWorkflow, error) {
	if f := fixtureOf(id); f != nil {
		return f, nil
	}
	return h.store.OpenwopWorkflow(ctx, tenant, id)
}

// StartRun creates a run of workflowID with inputs (a JSON object; left
// out or null is {}) and executes it in the background. A workflow whose nodes are
// not all provided by installed packs is refused (host.ErrInvalid).
func (h *Host) StartRun(ctx context.Context, tenant, workflowID string, inputs json.RawMessage) (*host.Run, error) {
	const op = "start run"
	if len(inputs) == 0 || string(inputs) == "null" {
		inputs = json.RawMessage(`{}`)
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(inputs, &obj) != nil || obj == nil {
		return nil, host.Invalid(op, "inputs", "must be a JSON object")
	}
	if workflowID == "" {
		return nil, host.Invalid(op, "workflowId", "is required")
	}
	w, err := h.openwopWorkflow(ctx, tenant, workflowID)
	if err != nil {
		return nil, err
	}
	prov, err := h.providers(ctx)
	if err != nil {
		return nil, err
	}
	refs, err := resolveNodes(w, prov)
	if err != nil {
		return nil, err
	}
	r := &host.Run{RunID: host.NewID("run"), Tenant: tenant, WorkflowID: w.WorkflowID, Status: host.RunRunning, Inputs: inputs}
	h.holdRun(r)
	if err := h.store.CreateRun(ctx, r, []host.RunEvent{runEvent(host.RunEventStarted, "", map[string]any{"workflowId": w.WorkflowID})}); err != nil {
		return nil, err
	}
	h.spawn(r, func(ctx context.Context) { h.execute(ctx, r, w, refs, progress{}) })
	return r, nil
}

// GetRun returns a tenant's run.
func (h *Host) GetRun(ctx context.Context, tenant, runID string) (*host.Run, error) {
	return h.store.Run(ctx, tenant, runID)
}

// RunEvents returns a tenant's run's event log.
func (h *Host) RunEvents(ctx context.Context, tenant, runID string) ([]host.RunEvent, error) {
	return h.store.RunEvents(ctx, tenant, runID)
}

// CancelRun cancels a running run (ErrConflict once it is terminal) and
// stops the node it is executing.
func (h *Host) CancelRun(ctx context.Context, tenant, runID, reason string) (*host.Run, error) {
	r, err := h.store.AdvanceRun(ctx, tenant, runID, "", host.RunCancelled, nil, []host.RunEvent{runEvent(host.RunEventCancelled, "", map[string]any{"reason": reason})})
	if err != nil {
		return nil, err
	}
	h.runs.mu.Lock()
	if cancel := h.runs.cancels[runID]; cancel != nil {
		cancel()
	}
	h.runs.mu.Unlock()
	return r, nil
}

// ForkRun forks a terminal run as openwop's replay spec (spec/v1/replay.md)
// describes mode "replay": the new run takes the source's events before
// fromSeq as fixed history (copied) and re-executes each node completed at
// or after it by replaying its recorded attempt, every host call answered
// from the trace. A replay that differs emits replay.diverged and the run
// carries on with what the replay produced (the spec's divergence is
// informational). Mode "branch" is not served.
func (h *Host) ForkRun(ctx context.Context, tenant, runID, mode string, fromSeq int) (*host.Run, error) {
	const op = "fork run"
	if mode != "replay" {
		return nil, host.Invalid(op, "mode", "must be \"replay\" (branch is not served)")
	}
	if fromSeq < 0 {
		return nil, host.Invalid(op, "fromSeq", "must be 0 or more")
	}
	src, err := h.store.Run(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	if !host.RunTerminal(src.Status) {
		return nil, host.Errorf(op, runID, host.ErrConflict, "the run is still %s", src.Status)
	}
	evs, err := h.store.RunEvents(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	if fromSeq > len(evs) {
		return nil, host.Invalid(op, "fromSeq", "the run has %d events", len(evs))
	}
	r := &host.Run{RunID: host.NewID("run"), Tenant: tenant, WorkflowID: src.WorkflowID, Status: host.RunRunning, Inputs: src.Inputs, ForkedFrom: src.RunID, Mode: mode, FromSeq: fromSeq}
	h.holdRun(r)
	first := []host.RunEvent{runEvent(host.RunEventStarted, "", map[string]any{"workflowId": src.WorkflowID, "sourceRunId": src.RunID, "mode": mode, "fromSeq": fromSeq})}
	for _, e := range evs[:max(fromSeq-1, 0)] { // fixed history (the source's run.started is replaced)
		if e.Type != host.RunEventStarted {
			first = append(first, host.RunEvent{Type: e.Type, NodeID: e.NodeID, Payload: e.Payload})
		}
	}
	if err := h.store.CreateRun(ctx, r, first); err != nil {
		return nil, err
	}
	h.spawn(r, func(ctx context.Context) { h.replayRun(ctx, r, evs[max(fromSeq-1, 0):]) })
	return r, nil
}

// spawn runs fn for r in the background, cancellable by CancelRun and
// waited for by Close. A run this process already executes is not started
// twice, and nothing starts once the host is closing (the run stays
// running, for the next start to continue).
func (h *Host) spawn(r *host.Run, fn func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	h.runs.mu.Lock()
	if h.runs.cancels == nil {
		h.runs.cancels = map[string]context.CancelFunc{}
	}
	if h.runs.closed || h.runs.cancels[r.RunID] != nil {
		h.runs.mu.Unlock()
		cancel()
		return
	}
	h.runs.cancels[r.RunID] = cancel
	h.runs.wg.Add(1)
	if h.runs.stopKeeper == nil {
		keep, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		h.runs.stopKeeper = func() { stop(); <-done }
		go func() { defer close(done); h.keepRuns(keep) }()
	}
	h.runs.mu.Unlock()
	go func() {
		defer h.runs.wg.Done()
		defer func() {
			h.runs.mu.Lock()
			delete(h.runs.cancels, r.RunID)
			h.runs.mu.Unlock()
			cancel()
		}()
		fn(ctx)
	}()
}

// stopRuns cancels every run executing here and waits for them. The runs
// are left running: the next dispatcher to take the store's dispatch lock
// continues them (continueRuns).
func (h *Host) stopRuns() {
	h.runs.mu.Lock()
	h.runs.closed = true
	for _, c := range h.runs.cancels {
		c()
	}
	stopKeeper := h.runs.stopKeeper
	h.runs.mu.Unlock()
	h.runs.wg.Wait()
	if stopKeeper != nil {
		stopKeeper() // no renewal in flight can extend the leases let go below
		// Let the runs left go at once: the next runner need not wait for
		// their leases to run out.
		if _, err := h.store.RenewRuns(context.Background(), h.cfg.RunnerID, time.Time{}); err != nil {
			h.log.Error("letting go of the openwop runs' leases", "err", err)
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
func (h *Host) execute(ctx context.Context, r *host.Run, w *host.OpenwopWorkflow, refs []string, p progress) {
	outputs := map[string]json.RawMessage{}
	for i, n := range w.Nodes {
		if out, done := p.outputs[n.ID]; done {
			outputs[n.ID] = out
			continue
		}
		attempt := p.started[n.ID]
		release, ok := h.nodeSlot(ctx)
		if !ok {
			return
		}
		if !h.advance(ctx, r, "", nil, runEvent(host.RunEventNodeStarted, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "pack": refs[i], "attempt": attempt})) {
			release()
			return
		}
		inv, err := h.InvokePack(ctx, refs[i], InvokeRequest{Node: n.TypeID, Input: r.Inputs, Tenant: r.Tenant, RunID: r.RunID, NodeID: n.ID, Attempt: attempt, AttemptGiven: true})
		release()
		if ctx.Err() != nil && (err != nil || inv.Result.Outcome != abi.Completed) {
			return
		}
		if err != nil {
			h.fail(ctx, r, n, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s: %v", n.ID, err)})
			return
		}
		evs := breaches(n.ID, inv.Attempt.AttemptID, inv.Result)
		res := inv.Result
		switch res.Outcome {
		case abi.Completed:
			outputs[n.ID] = res.Output
			evs = append(evs, runEvent(host.RunEventNodeDone, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "attemptId": inv.Attempt.AttemptID, "output": res.Output}))
			if !h.advance(ctx, r, "", nil, evs...) {
				return
			}
			continue
		case abi.Suspended:
			evs = append(evs, runEvent(host.RunEventNodeSuspend, n.ID, map[string]any{"nodeId": n.ID, "attemptId": inv.Attempt.AttemptID, "interrupt": res.Interrupt}))
			h.advance(ctx, r, "", nil, evs...)
			h.fail(ctx, r, n, suspendError(n))
			return
		}
		rerr := &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s %s", n.ID, res.Outcome)}
		if res.Error != nil {
			rerr.Message += ": " + res.Error.Code + ": " + res.Error.Message
		}
		evs = append(evs, runEvent(host.RunEventNodeFailed, n.ID, map[string]any{"nodeId": n.ID, "attemptId": inv.Attempt.AttemptID, "error": res.Error}))
		h.advance(ctx, r, "", nil, evs...)
		h.fail(ctx, r, n, rerr)
		return
	}
	h.advance(ctx, r, host.RunCompleted, nil, runEvent(host.RunEventCompleted, "", map[string]any{"outputs": outputs}))
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
func (h *Host) replayRun(ctx context.Context, r *host.Run, src []host.RunEvent) {
	for _, e := range src {
		if e.Type != host.RunEventNodeDone {
			continue
		}
		var p struct {
			NodeID    string `json:"nodeId"`
			TypeID    string `json:"typeId"`
			AttemptID string `json:"attemptId"`
		}
		json.Unmarshal(e.Payload, &p)
		n := host.OpenwopNode{ID: p.NodeID, TypeID: p.TypeID}
		release, ok := h.nodeSlot(ctx)
		if !ok {
			return // cancelled, or left running for the next start
		}
		v, err := h.Replay(ctx, p.AttemptID, ReplayOptions{})
		release()
		if ctx.Err() != nil && (err != nil || v.Got.Outcome != abi.Completed) {
			return // cancelled, or left running for the next start
		}
		if err != nil {
			h.fail(ctx, r, n, &host.RunError{Code: RunErrReplayFailed, Message: fmt.Sprintf("node %s: replay of attempt %s: %v", n.ID, p.AttemptID, err)})
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
			h.advance(ctx, r, "", nil, evs...)
			h.fail(ctx, r, n, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s %s on replay", n.ID, v.Got.Outcome)})
			return
		}
		evs = append(evs, runEvent(host.RunEventNodeDone, n.ID, map[string]any{"nodeId": n.ID, "typeId": n.TypeID, "attemptId": p.AttemptID, "replayed": true, "output": v.Got.Output}))
		if !h.advance(ctx, r, "", nil, evs...) {
			return
		}
	}
	h.advance(ctx, r, host.RunCompleted, nil, runEvent(host.RunEventCompleted, "", map[string]any{"sourceRunId": r.ForkedFrom}))
}

// fail ends r as failed because of node n.
func (h *Host) fail(ctx context.Context, r *host.Run, n host.OpenwopNode, rerr *host.RunError) {
	h.advance(ctx, r, host.RunFailed, rerr, runEvent(host.RunEventFailed, "", map[string]any{"nodeId": n.ID, "error": rerr}))
}

// advance appends evs (and a status) to r; false means the run is over
// here: cancelled, taken over by another runner (this one's lease ran
// out while it stalled), or the store failed (logged; the run is left as
// it is, for its lease to run out and a runner to continue it).
func (h *Host) advance(ctx context.Context, r *host.Run, status string, rerr *host.RunError, evs ...host.RunEvent) bool {
	// The store write must happen even when ctx was cancelled by
	// CancelRun: the run's own record then refuses it (ErrConflict).
	_, err := h.store.AdvanceRun(context.WithoutCancel(ctx), r.Tenant, r.RunID, h.cfg.RunnerID, status, rerr, evs)
	switch {
	case errors.Is(err, host.ErrConflict):
		h.log.Info("openwop run stopped here", "run", r.RunID, "why", err)
	case err != nil:
		h.log.Error("openwop run", "run", r.RunID, "err", err)
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
func (h *Host) OpenwopLoadedPacks(ctx context.Context) ([]string, error) {
	infos, err := h.index.PackInfos(ctx)
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

package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/packrun/packrun/abi"
	"github.com/packrun/packrun/host"
	"github.com/packrun/packrun/internal/dispatch"
	"github.com/packrun/packrun/runtime"
)

// Runs that wait for a person (openwop spec/v1/interrupt.md). A node that
// suspends — openwop_interrupt, or outcome "suspended" — puts its run in
// host.RunWaitingApproval, its interrupt in the log (node.suspended,
// interrupt.requested, and approval.requested for kind "approval"). The
// run then waits in the store, executing nowhere and claimed by no
// runner, until ResolveInterrupt records the resolution (approval.received,
// or interrupt.resolved) and takes it back to running in one transaction
// (host.Runs.ResumeRun): the node is run again as its next attempt, handed
// every resumeValue resolved for it so far, oldest first, as the values
// its successive openwop_interrupt calls return.

// ApprovalGateType is the typeId of packrun's built-in approval gate, run
// in process: it suspends with an approval interrupt (actions accept and
// reject); resumed with accept it completes with the resumeValue as its
// output, with reject it fails (approval_rejected).
const ApprovalGateType = "core.approvalGate"

// approvalRejected is the error code of an approval gate resolved with
// reject.
const approvalRejected = "approval_rejected"

// approvalFixture is openwop's conformance-approval fixture
// (conformance/fixtures.md): one approval gate, node "gate".
var approvalFixture = host.OpenwopWorkflow{WorkflowID: "conformance-approval", Builtin: true, Nodes: []host.OpenwopNode{{ID: "gate", TypeID: ApprovalGateType}}}

// builtinPack names the provider of the node types packrun runs in
// process (providers).
const builtinPack = "packrun"

// builtinNodes are the node types packrun runs in process.
var builtinNodes = []string{ApprovalGateType}

// approvalActions are the approval resume actions a node may offer
// (interrupt.md's ApprovalResume; "ask", which does not end the
// interrupt, is not served), and defaultActions those offered when the
// interrupt does not list its own.
var (
	approvalActions = []string{"accept", "reject", "refine", "edit-accept"}
	defaultActions  = []string{"accept", "reject"}
)

// interruptKinds are openwop's interrupt kinds; a payload naming none of
// them is of kind "custom".
var interruptKinds = []string{"approval", "clarification", "external-event", "custom"}

// invokeNode runs node n of r as attempt, handed resume: the built-in
// approval gate in process, any other through the pack ref (Invoke, a
// recorded attempt). It returns the attempt's id ("" for a built-in).
func (s *Scheduler) invokeNode(ctx context.Context, r *host.Run, n host.OpenwopNode, ref string, attempt int, resume []json.RawMessage) (string, *runtime.Result, error) {
	if n.TypeID == ApprovalGateType {
		return "", approvalGate(r, n, resume), nil
	}
	att, res, err := s.cfg.Invoke(ctx, dispatch.InvokeRequest{Pack: ref, Node: n.TypeID, Input: nodeInput(n, r.Inputs), Tenant: r.Tenant, RunID: r.RunID,
		NodeID: n.ID, Attempt: attempt, AttemptGiven: true, Resume: resume})
	if err != nil {
		return "", res, err
	}
	return att.AttemptID, res, nil
}

// approvalGate is the built-in approval gate's outcome, given the values
// its interrupts were resolved with.
func approvalGate(r *host.Run, n host.OpenwopNode, resume []json.RawMessage) *runtime.Result {
	res := &runtime.Result{Node: n.TypeID}
	if len(resume) == 0 {
		in, _ := json.Marshal(map[string]any{"kind": "approval", "key": r.RunID + ":" + n.ID + ":0", "data": map[string]any{
			"artifactId": r.RunID, "artifactType": "run", "title": "Approve run " + r.RunID + " at node " + n.ID,
			"artifactData": json.RawMessage(r.Inputs), "actions": defaultActions}})
		res.Outcome, res.Interrupt = abi.Suspended, in
		return res
	}
	last := resume[len(resume)-1]
	if approvalAction(last) == "reject" {
		res.Outcome, res.Error = abi.Failed, &abi.Error{Code: approvalRejected, Message: "the approval of node " + n.ID + " was rejected"}
		return res
	}
	res.Outcome, res.Output = abi.Completed, last
	return res
}

// approvalAction is the action of an approval resumeValue ("" if none).
func approvalAction(v json.RawMessage) string {
	var a struct {
		Action string `json:"action"`
	}
	_ = json.Unmarshal(v, &a) // checked by ResolveInterrupt before it was recorded
	return a.Action
}

// interrupt is a node's interrupt as its interrupt.requested event
// records it.
type interrupt struct {
	NodeID string `json:"nodeId"`
	Kind   string `json:"kind"`
	Key    string `json:"key"`
	// Actions are the approval actions it accepts (kind "approval").
	Actions []string `json:"actions,omitempty"`
	// Interrupt is the payload the node suspended with.
	Interrupt json.RawMessage `json:"interrupt"`
}

// interruptOf reads the payload a node suspended with: its kind (openwop's
// kinds; otherwise "custom"), its key (the payload's, or
// runId:nodeId:count) and, for kind "approval", the actions it offers.
func interruptOf(payload json.RawMessage, runID, nodeID string, count int) interrupt {
	in := interrupt{NodeID: nodeID, Kind: "custom", Key: fmt.Sprintf("%s:%s:%d", runID, nodeID, count), Interrupt: payload}
	var p struct {
		Kind string `json:"kind"`
		Key  string `json:"key"`
		Data struct {
			Actions []string `json:"actions"`
		} `json:"data"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return in
	}
	if slices.Contains(interruptKinds, p.Kind) {
		in.Kind = p.Kind
	}
	if p.Key != "" && len(p.Key) <= 256 {
		in.Key = p.Key
	}
	if in.Kind == "approval" {
		for _, a := range p.Data.Actions {
			if slices.Contains(approvalActions, a) && !slices.Contains(in.Actions, a) {
				in.Actions = append(in.Actions, a)
			}
		}
		if len(in.Actions) == 0 {
			in.Actions = defaultActions
		}
	}
	return in
}

// suspend puts r, whose node n suspended in attempt attemptID, in
// waiting-approval, recording evs (its breaches) and its interrupt.
func (s *Scheduler) suspend(ctx context.Context, r *host.Run, n host.OpenwopNode, attemptID string, res *runtime.Result, p progress, evs []host.RunEvent) {
	in := interruptOf(res.Interrupt, r.RunID, n.ID, len(p.resume[n.ID]))
	evs = append(evs,
		runEvent(host.RunEventNodeSuspend, n.ID, map[string]any{"nodeId": n.ID, "attemptId": attemptID, "interrupt": res.Interrupt, "reason": in.Kind}),
		runEvent(host.RunEventInterruptRequested, n.ID, map[string]any{"nodeId": in.NodeID, "kind": in.Kind, "key": in.Key, "actions": in.Actions, "interrupt": in.Interrupt}))
	if in.Kind == "approval" {
		evs = append(evs, runEvent(host.RunEventApprovalRequested, n.ID, map[string]any{"nodeId": n.ID, "key": in.Key, "actions": in.Actions, "interrupt": in.Interrupt}))
	}
	s.advance(ctx, r, host.RunWaitingApproval, nil, evs...)
}

// pendingInterrupt is the interrupt the log evs waits on: its last
// interrupt.requested, unless a resolution follows it (nil then).
func pendingInterrupt(evs []host.RunEvent) *interrupt {
	var in *interrupt
	for _, e := range evs {
		switch e.Type {
		case host.RunEventInterruptRequested:
			in = &interrupt{}
			_ = json.Unmarshal(e.Payload, in) // written by suspend, stored as written
		case host.RunEventApprovalReceived, host.RunEventInterruptResolved:
			in = nil
		}
	}
	return in
}

// ResolveInterrupt resolves the interrupt the tenant's run waits on at
// node nodeID with value (openwop's resumeValue), decided by by: the
// resolution is recorded and the run continues here, the node run again
// with it. Another tenant's run, or a node with no interrupt waiting, is
// ErrNotFound; a run not waiting (already resolved, or ended) is
// ErrConflict; a value the interrupt does not accept (kind "approval":
// an object whose action it offers) is ErrValidation.
func (s *Scheduler) ResolveInterrupt(ctx context.Context, tenant, runID, nodeID string, value json.RawMessage, by string) (*host.Run, error) {
	const op = "resolve interrupt"
	r, err := s.cfg.Store.Run(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	evs, err := s.cfg.Store.RunEvents(ctx, tenant, runID)
	if err != nil {
		return nil, err
	}
	in := pendingInterrupt(evs)
	if r.Status != host.RunWaitingApproval || in == nil {
		return nil, host.Errorf(op, runID, host.ErrConflict, "the run is %s: no interrupt waits to be resolved", r.Status)
	}
	if in.NodeID != nodeID {
		return nil, host.Errorf(op, host.ShortName(nodeID), host.ErrNotFound, "the run waits on node %s's interrupt, not this node's", in.NodeID)
	}
	if len(value) == 0 || string(value) == "null" {
		return nil, host.Invalid(op, "resumeValue", "is required")
	}
	ev := runEvent(host.RunEventInterruptResolved, nodeID, map[string]any{"nodeId": nodeID, "kind": in.Kind, "key": in.Key, "resumeValue": value, "decidedBy": by})
	if in.Kind == "approval" {
		action := approvalAction(value)
		if !slices.Contains(in.Actions, action) {
			return nil, host.Invalid(op, "resumeValue.action", "must be one of %s", strings.Join(in.Actions, ", "))
		}
		ev = runEvent(host.RunEventApprovalReceived, nodeID, map[string]any{"nodeId": nodeID, "key": in.Key, "action": action, "resumeValue": value,
			"decidedBy": by, "decidedAt": time.Now().UTC().Format(time.RFC3339Nano)})
	}
	run, err := s.cfg.Store.ResumeRun(ctx, tenant, runID, s.cfg.RunnerID, time.Now().Add(s.cfg.LeaseTTL), []host.RunEvent{ev})
	if err != nil {
		return nil, err
	}
	s.start(run, func(ctx context.Context) { s.resumeRun(ctx, run) }, true)
	return run, nil
}

// resumeRun executes r from its log once its interrupt was resolved.
func (s *Scheduler) resumeRun(ctx context.Context, r *host.Run) {
	evs, err := s.cfg.Store.RunEvents(ctx, r.Tenant, r.RunID)
	if err != nil {
		s.cfg.Log.Error("resume openwop run", "run", r.RunID, "err", err)
		return // left running under this runner's lease: the next start continues it
	}
	p := progressOf(evs)
	w, err := s.openwopWorkflow(ctx, r.Tenant, r.WorkflowID)
	if err != nil {
		s.fail(ctx, r, host.OpenwopNode{}, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("resuming the run: %v", err)})
		return
	}
	prov, err := s.providers(ctx)
	if err != nil {
		s.cfg.Log.Error("resume openwop run", "run", r.RunID, "err", err)
		return
	}
	refs, err := resolveNodes(w, prov)
	if err != nil {
		s.fail(ctx, r, nextNode(w, p), &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("resuming the run: %v", err)})
		return
	}
	s.execute(ctx, r, w, refs, p)
}

// withCurrentNode sets r.CurrentNodeID when r waits on an interrupt.
func (s *Scheduler) withCurrentNode(ctx context.Context, r *host.Run) (*host.Run, error) {
	if r.Status != host.RunWaitingApproval {
		return r, nil
	}
	evs, err := s.cfg.Store.RunEvents(ctx, r.Tenant, r.RunID)
	if err != nil {
		return nil, err
	}
	if in := pendingInterrupt(evs); in != nil {
		r.CurrentNodeID = in.NodeID
	}
	return r, nil
}

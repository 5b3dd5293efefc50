package packrun

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/packrun/packrun/host"
)

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
	// recorded (the run ends failed), with that event's type.
	ended, endedType string
}

// progressOf reads a run's event log.
func progressOf(evs []host.RunEvent) progress {
	p := progress{outputs: map[string]json.RawMessage{}, started: map[string]int{}}
	for _, e := range evs {
		switch e.Type {
		case host.RunEventNodeStarted:
			p.started[e.NodeID]++
		case host.RunEventNodeDone:
			var v struct {
				Output json.RawMessage `json:"output"`
			}
			json.Unmarshal(e.Payload, &v)
			p.outputs[e.NodeID] = v.Output
		case host.RunEventNodeFailed, host.RunEventNodeSuspend:
			p.ended, p.endedType = e.NodeID, e.Type
		}
	}
	return p
}

// continueRuns claims, and continues in the background, the runs a
// stopped or stalled runner left: every run not terminal when alone (the
// dispatcher holds the store's dispatch lock: whoever ran them stopped),
// else those whose lease ran out (several nodes on one store: the
// dispatcher calls this at start and every half lease). A claimed run is
// this host's: the runner it was taken from has its next advance refused.
func (h *Host) continueRuns(ctx context.Context, alone bool) {
	expired := time.Now()
	if alone {
		expired = host.ClaimEveryRun
	}
	runs, err := h.store.ClaimRuns(ctx, h.cfg.RunnerID, expired, time.Now().Add(h.cfg.LeaseTTL))
	if err != nil {
		if ctx.Err() == nil {
			h.log.Error("continue openwop runs", "err", err)
		}
		return
	}
	// A run this process executes already (started between its CreateRun
	// and its spawn, or its own lease ran out while it stalled) is not
	// started twice: spawn refuses. A run claimed in the instant between
	// its CreateRun and its spawn then executes once, after a run.resumed
	// naming attempt 0.
	for _, r := range runs {
		h.spawn(r, func(ctx context.Context) { h.continueRun(ctx, r) })
	}
	if len(runs) > 0 {
		h.log.Info("continuing openwop runs left running", "count", len(runs))
	}
}

// chores are the host's singleton chores, run by the process holding the
// dispatch lock (dispatch.Config.Chores): expired memory entries are
// deleted (they are never read; this gives their space back).
func (h *Host) chores(ctx context.Context) {
	n, err := h.store.Sweep(ctx)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		h.log.Error("sweeping expired memory", "err", err)
	case n > 0:
		h.log.Info("swept expired memory entries", "count", n)
	}
}

// continueRun continues r from its event log.
func (h *Host) continueRun(ctx context.Context, r *host.Run) {
	evs, err := h.store.RunEvents(ctx, r.Tenant, r.RunID)
	if err != nil {
		h.log.Error("continue openwop run", "run", r.RunID, "err", err)
		return
	}
	p := progressOf(evs)
	if r.ForkedFrom != "" {
		h.continueFork(ctx, r, p)
		return
	}
	w, err := h.openwopWorkflow(ctx, r.Tenant, r.WorkflowID)
	if err != nil {
		h.fail(ctx, r, host.OpenwopNode{}, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("continuing the run: %v", err)})
		return
	}
	next := nextNode(w, p)
	if p.ended != "" {
		h.endFailed(ctx, r, host.OpenwopNode{ID: p.ended}, p.endedType)
		return
	}
	prov, err := h.providers(ctx)
	if err != nil {
		h.log.Error("continue openwop run", "run", r.RunID, "err", err)
		return
	}
	refs, err := resolveNodes(w, prov)
	if err != nil {
		h.fail(ctx, r, next, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("continuing the run: %v", err)})
		return
	}
	resumed := map[string]any{"reason": ResumeReason}
	if next.ID != "" { // a node is left to run
		resumed["nodeId"], resumed["attempt"], resumed["interrupted"] = next.ID, p.started[next.ID], p.started[next.ID] > 0
	}
	if !h.advance(ctx, r, "", nil, runEvent(host.RunEventResumed, next.ID, resumed)) {
		return
	}
	h.execute(ctx, r, w, refs, p)
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
func (h *Host) endFailed(ctx context.Context, r *host.Run, n host.OpenwopNode, evType string) {
	rerr := &host.RunError{Code: RunErrNodeFailed, Message: "node " + n.ID + " failed"}
	if evType == host.RunEventNodeSuspend {
		rerr = suspendError(n)
	}
	h.fail(ctx, r, n, rerr)
}

// continueFork continues a :fork replay: the source's nodes from fromSeq
// on that the fork has not completed are replayed.
func (h *Host) continueFork(ctx context.Context, r *host.Run, p progress) {
	src, err := h.store.RunEvents(ctx, r.Tenant, r.ForkedFrom)
	if err != nil {
		h.fail(ctx, r, host.OpenwopNode{}, &host.RunError{Code: RunErrReplayFailed, Message: fmt.Sprintf("continuing the fork: %v", err)})
		return
	}
	var todo []host.RunEvent
	for _, e := range src[min(max(r.FromSeq-1, 0), len(src)):] {
		if _, done := p.outputs[e.NodeID]; e.Type != host.RunEventNodeDone || !done {
			todo = append(todo, e)
		}
	}
	if p.ended != "" {
		h.fail(ctx, r, host.OpenwopNode{ID: p.ended}, &host.RunError{Code: RunErrNodeFailed, Message: fmt.Sprintf("node %s failed on replay", p.ended)})
		return
	}
	if !h.advance(ctx, r, "", nil, runEvent(host.RunEventResumed, "", map[string]any{"reason": ResumeReason})) {
		return
	}
	h.replayRun(ctx, r, todo)
}

package host

import (
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// An openwop run (openwop's run API, served by `packrun serve` under
// /v1/runs) executes an openwop workflow definition: an ordered list of
// nodes, each naming an installed pack's node typeId or a core.* type. It is a different
// thing from the agent runtime schema's workflow records (state machines driven by task
// outcomes); the two are kept apart so the latter can later back the
// former.

// Run statuses. A run is created running; completed, failed and cancelled
// are terminal. A run whose node suspended waits, in the store, for a
// person: RunWaitingApproval, until its interrupt is resolved
// (Runs.ResumeRun) or it is cancelled.
const (
	RunRunning         = "running"
	RunWaitingApproval = "waiting-approval"
	RunCompleted       = "completed"
	RunFailed          = "failed"
	RunCancelled       = "cancelled"
)

// RunTerminal reports whether status is terminal.
func RunTerminal(status string) bool {
	return status == RunCompleted || status == RunFailed || status == RunCancelled
}

// OpenwopWorkflow is an openwop workflow definition: its nodes run in
// order, each handed the run's inputs.
type OpenwopWorkflow struct {
	WorkflowID string        `json:"workflowId"`
	Tenant     string        `json:"tenant,omitempty"`
	Nodes      []OpenwopNode `json:"nodes"`
	// Variables are the run inputs the definition declares (openwop's
	// workflow variables): their defaults are applied, the required ones
	// checked, when a run starts.
	Variables []OpenwopVariable `json:"variables,omitempty"`
	// Builtin marks the conformance fixtures compiled into packrun.
	Builtin bool `json:"builtin,omitempty"`
}

// OpenwopNode is one node of an OpenwopWorkflow.
type OpenwopNode struct {
	// ID is the node's id within the workflow (nodeContext.nodeId).
	ID string `json:"id"`
	// TypeID is the installed pack node that runs it, or one of the
	// core.* types packrun runs itself (core.noop, core.delay, core.fail).
	TypeID string `json:"typeId"`
	// Inputs binds the node's input ports (openwop's PortValue: a static
	// value or a workflow variable). A node without any is handed the
	// run's inputs whole.
	Inputs map[string]OpenwopPort `json:"inputs,omitempty"`
}

// OpenwopPort is the value of a node's input port: Type "static" (Value)
// or "variable" (the run's input VariableName; Optional: may be absent).
type OpenwopPort struct {
	Type         string          `json:"type"`
	Value        json.RawMessage `json:"value,omitempty"`
	VariableName string          `json:"variableName,omitempty"`
	Optional     bool            `json:"optional,omitempty"`
}

// OpenwopVariable is a workflow variable: a run input of Name, of Type
// (string, number, boolean, object or array), Required unless it has a
// DefaultValue, which a run that leaves it out takes.
type OpenwopVariable struct {
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Required     bool            `json:"required,omitempty"`
	DefaultValue json.RawMessage `json:"defaultValue,omitempty"`
}

// openwopVariableTypes are the JSON types a variable may have.
var openwopVariableTypes = map[string]bool{"string": true, "number": true, "boolean": true, "object": true, "array": true}

// ValidateOpenwopWorkflow checks a definition: an id, at least one node,
// node ids unique and non-empty, every node naming a typeId.
func ValidateOpenwopWorkflow(op string, w *OpenwopWorkflow) error {
	if !validRef(w.WorkflowID) {
		return Invalid(op, "workflowId", "must be 1 to 128 characters of letters, digits, '.', '-' and '_'")
	}
	if len(w.Nodes) == 0 || len(w.Nodes) > 64 {
		return Invalid(op, "nodes", "must list 1 to 64 nodes")
	}
	seen := map[string]bool{}
	for i, n := range w.Nodes {
		if !validRef(n.ID) || seen[n.ID] {
			return Invalid(op, "nodes["+itoa(i)+"].id", "must be a unique id of 1 to 128 letters, digits, '.', '-' and '_'")
		}
		seen[n.ID] = true
		if !validRef(n.TypeID) {
			return Invalid(op, "nodes["+itoa(i)+"].typeId", "must name a node typeId")
		}
	}
	vars := map[string]*OpenwopVariable{}
	for i := range w.Variables {
		v := &w.Variables[i]
		f := "variables[" + itoa(i) + "]"
		if !validRef(v.Name) || vars[v.Name] != nil {
			return Invalid(op, f+".name", "must be a unique name of 1 to 128 letters, digits, '.', '-' and '_'")
		}
		vars[v.Name] = v
		if !openwopVariableTypes[v.Type] {
			return Invalid(op, f+".type", "must be string, number, boolean, object or array")
		}
		if v.DefaultValue != nil && !OpenwopValueHasType(v.DefaultValue, v.Type) {
			return Invalid(op, f+".defaultValue", "must be a %s", v.Type)
		}
	}
	for i, n := range w.Nodes {
		for name, p := range n.Inputs {
			f := "nodes[" + itoa(i) + "].inputs." + ShortName(name)
			switch p.Type {
			case "static":
				if p.Value == nil || p.VariableName != "" || p.Optional {
					return Invalid(op, f, "a static port takes a value and nothing else")
				}
			case "variable":
				if p.Value != nil {
					return Invalid(op, f, "a variable port takes variableName (and optional), no value")
				}
				if vars[p.VariableName] == nil {
					return Invalid(op, f+".variableName", "names no variable of the workflow")
				}
			default:
				return Invalid(op, f+".type", "must be static or variable (packrun does not evaluate expressions or connections)")
			}
		}
	}
	return nil
}

// OpenwopValueHasType reports whether the JSON value v is of the
// variable type typ.
func OpenwopValueHasType(v json.RawMessage, typ string) bool {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return false
	}
	switch x.(type) {
	case string:
		return typ == "string"
	case float64:
		return typ == "number"
	case bool:
		return typ == "boolean"
	case map[string]any:
		return typ == "object"
	case []any:
		return typ == "array"
	}
	return false // null
}

func validRef(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func itoa(i int) string { return strconv.Itoa(i) }

// Run is one openwop run: GET /v1/runs/{id}.
type Run struct {
	RunID      string          `json:"runId"`
	Tenant     string          `json:"tenant"`
	WorkflowID string          `json:"workflowId"`
	Status     string          `json:"status"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
	// ForkedFrom (openwop's sourceRunId), Mode and FromSeq are set on a
	// run made by :fork.
	ForkedFrom string `json:"sourceRunId,omitempty"`
	Mode       string `json:"mode,omitempty"`
	FromSeq    int    `json:"fromSeq,omitempty"`
	// RecursionLimit bounds the nodes the run executes (openwop's
	// RunOptions.configurable.recursionLimit; 0: no bound): the node
	// past it is not started, the run fails recursion_limit_exceeded.
	RecursionLimit int       `json:"recursionLimit,omitempty"`
	Error          *RunError `json:"error,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
	UpdatedAt      time.Time `json:"updatedAt"`
	// Holder is the runner executing the run, and LeaseUntil when its
	// hold ends unless renewed (Runs.ClaimRuns, Runs.RenewRuns). Kept
	// apart from the run's record: not part of openwop's run.
	Holder     string    `json:"-"`
	LeaseUntil time.Time `json:"-"`

	// CurrentNodeID names, while the run waits for a person, the node
	// whose interrupt it waits on (read from its log, not stored).
	CurrentNodeID string `json:"currentNodeId,omitempty"`
	// Variables are, once the run completed, the run variables its core
	// memory nodes set (read from its log, not stored).
	Variables map[string]json.RawMessage `json:"variables,omitempty"`
}

// RunOptions are a run request's options (openwop's
// RunOptions.configurable that packrun honours).
type RunOptions struct {
	// RecursionLimit is Run.RecursionLimit (0: none).
	RecursionLimit int
}

// ClaimEveryRun, as ClaimRuns' expired, claims every run not terminal
// whatever its lease: a time after any lease.
var ClaimEveryRun = time.Unix(1<<40, 0)

// RunError is why a run failed.
type RunError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RunEvent is one entry of a run's event log (GET /v1/runs/{id}/events).
// Its detail is under both payload (openwop's current envelope field) and
// data (what older clients read).
type RunEvent struct {
	Seq     int             `json:"seq"`
	Type    string          `json:"type"`
	RunID   string          `json:"runId"`
	NodeID  string          `json:"nodeId,omitempty"`
	Payload json.RawMessage `json:"payload"`
	Data    json.RawMessage `json:"data"`
	At      time.Time       `json:"at"`
}

// Run event types (openwop's dotted names).
const (
	RunEventStarted     = "run.started"
	RunEventCompleted   = "run.completed"
	RunEventFailed      = "run.failed"
	RunEventCancelled   = "run.cancelled"
	RunEventNodeStarted = "node.started"
	RunEventNodeDone    = "node.completed"
	RunEventNodeFailed  = "node.failed"
	RunEventNodeSuspend = "node.suspended"
	RunEventCapBreached = "cap.breached"
	// RunEventReplayDiverged: a replay fork's node did not reproduce
	// the source run's (openwop spec/v1/replay.md §"Failure surfaces").
	RunEventReplayDiverged = "replay.diverged"
	// RunEventResumed: a run left running by a process that stopped is
	// continued by another (or the same, restarted): its payload names the
	// node run again, its new attempt number and why.
	RunEventResumed = "run.resumed"
	// A node's interrupt (openwop spec/v1/interrupt.md): requested when
	// it suspends (with approval.requested for kind "approval"), and
	// resolved by POST /v1/runs/{id}/interrupts/{nodeId}: approval.received
	// for kind "approval", interrupt.resolved for the other kinds. The
	// resolution's payload carries the resumeValue the node is re-run with.
	RunEventInterruptRequested = "interrupt.requested"
	RunEventApprovalRequested  = "approval.requested"
	RunEventApprovalReceived   = "approval.received"
	RunEventInterruptResolved  = "interrupt.resolved"
)

// RunIdempotencyTTL is how long an Idempotency-Key of POST /v1/runs
// answers the run it started.
const RunIdempotencyTTL = 24 * time.Hour

// RunIdempotency is a run request's Idempotency-Key: Key, the Digest of
// the request (a different body under the same key is refused), and how
// long the key holds.
type RunIdempotency struct {
	Key    string
	Digest string
	TTL    time.Duration
}

// Runs stores openwop workflow definitions and runs.
type Runs interface {
	// PutOpenwopWorkflow adds or replaces a tenant's definition.
	PutOpenwopWorkflow(ctx context.Context, w *OpenwopWorkflow) error
	// OpenwopWorkflow returns a tenant's definition (ErrNotFound).
	OpenwopWorkflow(ctx context.Context, tenant, id string) (*OpenwopWorkflow, error)
	// OpenwopWorkflows lists a tenant's definitions by id (at most 1,000).
	OpenwopWorkflows(ctx context.Context, tenant string) ([]*OpenwopWorkflow, error)
	// CreateRun stores a new run with its first events, held by r.Holder
	// until r.LeaseUntil (the runner executing it; none if empty).
	CreateRun(ctx context.Context, r *Run, evs []RunEvent) error
	// CreateRunOnce is CreateRun under a tenant's idempotency key k: when
	// the key is held (not expired) by a request of k.Digest, it returns
	// that request's run and false, storing nothing; of another digest,
	// ErrIdempotencyMismatch; else it stores r, holding the key for
	// k.TTL, and returns r and true.
	CreateRunOnce(ctx context.Context, r *Run, evs []RunEvent, k RunIdempotency) (*Run, bool, error)
	// Run returns a tenant's run (ErrNotFound, also for another tenant's).
	Run(ctx context.Context, tenant, runID string) (*Run, error)
	// AdvanceRun appends evs to a run's log and, when status is not
	// empty, sets its status (and rerr), in one transaction. A run
	// already terminal answers ErrConflict and nothing changes. holder,
	// when not empty, fences the write: a run another runner has claimed
	// since (the lease of holder ran out) answers ErrConflict too, and
	// nothing changes; a user's write (cancel) passes "".
	AdvanceRun(ctx context.Context, tenant, runID, holder, status string, rerr *RunError, evs []RunEvent) (*Run, error)
	// RunEvents returns a run's log in order.
	RunEvents(ctx context.Context, tenant, runID string) ([]RunEvent, error)
	// ClaimRuns gives holder, until until, every tenant's run that is not
	// terminal and whose lease ended at or before expired (a run nobody
	// holds included), oldest first, and returns them: the runs a runner
	// that stopped or stalled left, which the caller continues. Several
	// runners claiming at once never get the same run. Pass
	// ClaimEveryRun as expired to take them all, leases or not (a
	// dispatcher that holds the store alone: their runners are gone).
	ClaimRuns(ctx context.Context, holder string, expired, until time.Time) ([]*Run, error)
	// RenewRuns extends to until the lease of every run that holder holds
	// and is not terminal, and says how many.
	RenewRuns(ctx context.Context, holder string, until time.Time) (int, error)
	// ResumeRun takes a tenant's run waiting for a person
	// (RunWaitingApproval) back to running, held by holder until until,
	// appending evs (the interrupt's resolution), in one transaction. A
	// run not waiting answers ErrConflict and nothing changes: of two
	// resolutions of one interrupt, the second is refused. ClaimRuns
	// never claims a waiting run: it waits for ResumeRun, or a cancel.
	ResumeRun(ctx context.Context, tenant, runID, holder string, until time.Time, evs []RunEvent) (*Run, error)
}

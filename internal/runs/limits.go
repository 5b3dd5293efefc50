package runs

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"

	"github.com/packrun/packrun/host"
)

// A run's node-execution limit (openwop run-options.md recursionLimit):
// POST /v1/runs {configurable: {recursionLimit: N}} bounds the node
// executions of the run, every attempt of every node counted, the runs of
// a node again after its interrupt was resolved included. The node that
// would be execution N+1 does not start: a cap.breached of kind
// node-executions {limit, observed, nodeId} is recorded and the run fails
// recursion_limit_exceeded. Without one, a run is bounded by nothing but
// its nodes.

// RunErrRecursionLimit is the code of a run that reached its
// configurable.recursionLimit.
const RunErrRecursionLimit = "recursion_limit_exceeded"

// MaxRecursionLimit bounds configurable.recursionLimit.
const MaxRecursionLimit = 10000

// capNodeExecutions is the cap.breached kind of a node-execution limit.
const capNodeExecutions = "node-executions"

// checkConfigurable checks a run request's configurable (a JSON object, or
// left out): packrun serves recursionLimit, an integer from 1 to
// MaxRecursionLimit, and refuses any other key by name. It returns the
// compact form to store (nil when left out or empty).
func checkConfigurable(op string, configurable json.RawMessage) (json.RawMessage, error) {
	if len(configurable) == 0 || string(configurable) == "null" {
		return nil, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(configurable, &m) != nil || m == nil {
		return nil, host.Invalid(op, "configurable", "must be a JSON object")
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k != "recursionLimit" {
			return nil, host.Invalid(op, "configurable."+host.ShortName(k), "is not served (packrun serves recursionLimit)")
		}
	}
	if len(m) == 0 {
		return nil, nil
	}
	n, err := strconv.Atoi(string(m["recursionLimit"]))
	if err != nil || n < 1 || n > MaxRecursionLimit {
		return nil, host.Invalid(op, "configurable.recursionLimit", "must be an integer from 1 to %d", MaxRecursionLimit)
	}
	return json.RawMessage(`{"recursionLimit":` + strconv.Itoa(n) + `}`), nil
}

// recursionLimit is r's node-execution limit (0: none).
func recursionLimit(r *host.Run) int {
	var c struct {
		RecursionLimit int `json:"recursionLimit"`
	}
	_ = json.Unmarshal(r.Configurable, &c) // checked by checkConfigurable before it was stored
	return c.RecursionLimit
}

// executions counts the node executions p records.
func (p progress) executions() int {
	n := 0
	for _, c := range p.started {
		n += c
	}
	return n
}

// overLimit ends r, recursion_limit_exceeded after a cap.breached, when
// starting n would be one node execution more than its limit (done
// executions so far); false when n may start.
func (s *Scheduler) overLimit(ctx context.Context, r *host.Run, n host.OpenwopNode, done int) bool {
	limit := recursionLimit(r)
	if limit == 0 || done < limit {
		return false
	}
	breach := runEvent(host.RunEventCapBreached, n.ID, map[string]any{"nodeId": n.ID, "kind": capNodeExecutions, "limit": limit, "observed": done + 1})
	rerr := &host.RunError{Code: RunErrRecursionLimit, Message: "node " + n.ID + " would be node execution " + strconv.Itoa(done+1) + " of the run; its configurable.recursionLimit is " + strconv.Itoa(limit)}
	s.advance(ctx, r, host.RunFailed, rerr, breach, runEvent(host.RunEventFailed, "", map[string]any{"nodeId": n.ID, "error": rerr}))
	return true
}

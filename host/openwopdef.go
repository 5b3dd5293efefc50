package host

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"time"
)

// OpenwopDefinition is an openwop workflow definition as openwop publishes
// it (schemas/workflow-definition.schema.json: id, name, version, nodes,
// edges, triggers, variables, metadata, settings...). Decoded strictly (no
// unknown field, as the schema's additionalProperties: false says),
// OpenwopFromDefinition checks it against the schema's rules and turns
// it into the OpenwopWorkflow packrun runs, refusing (ErrUnsupported)
// what packrun cannot execute.
type OpenwopDefinition struct {
	ID                        string                     `json:"id"`
	Name                      string                     `json:"name"`
	Description               string                     `json:"description,omitempty"`
	Version                   string                     `json:"version"`
	Type                      string                     `json:"type,omitempty"`
	IsActive                  *bool                      `json:"isActive,omitempty"`
	Status                    string                     `json:"status,omitempty"`
	TenantID                  string                     `json:"tenantId,omitempty"`
	ScopeID                   string                     `json:"scopeId,omitempty"`
	Slug                      string                     `json:"slug,omitempty"`
	Nodes                     []OpenwopDefNode           `json:"nodes"`
	Edges                     []OpenwopDefEdge           `json:"edges"`
	Triggers                  []OpenwopDefTrigger        `json:"triggers"`
	Variables                 []OpenwopDefVariable       `json:"variables"`
	Groups                    []json.RawMessage          `json:"groups,omitempty"`
	Channels                  map[string]json.RawMessage `json:"channels,omitempty"`
	ConfigurableSchema        json.RawMessage            `json:"configurableSchema,omitempty"`
	Defaults                  json.RawMessage            `json:"defaults,omitempty"`
	Metadata                  *OpenwopDefMetadata        `json:"metadata"`
	Settings                  *OpenwopDefSettings        `json:"settings"`
	AcceptsInheritedArtifacts []json.RawMessage          `json:"acceptsInheritedArtifacts,omitempty"`
	CreatedAt                 string                     `json:"createdAt,omitempty"`
	UpdatedAt                 string                     `json:"updatedAt,omitempty"`
}

// OpenwopDefNode is a node of an OpenwopDefinition (WorkflowNode).
type OpenwopDefNode struct {
	ID                string                     `json:"id"`
	TypeID            string                     `json:"typeId"`
	Name              string                     `json:"name"`
	Position          *OpenwopDefPosition        `json:"position"`
	Config            map[string]json.RawMessage `json:"config"`
	Inputs            map[string]OpenwopDefPort  `json:"inputs"`
	CredentialsRef    string                     `json:"credentialsRef,omitempty"`
	Settings          map[string]json.RawMessage `json:"settings,omitempty"`
	OutputRole        string                     `json:"outputRole,omitempty"`
	Disabled          bool                       `json:"disabled,omitempty"`
	Notes             string                     `json:"notes,omitempty"`
	GroupID           string                     `json:"groupId,omitempty"`
	Agent             json.RawMessage            `json:"agent,omitempty"`
	EnvelopeContract  map[string]json.RawMessage `json:"envelopeContract,omitempty"`
	ArtifactType      string                     `json:"artifactType,omitempty"`
	CardType          string                     `json:"cardType,omitempty"`
	OutputSensitivity map[string]bool            `json:"outputSensitivity,omitempty"`
}

// OpenwopDefPosition is a node's place on a canvas.
type OpenwopDefPosition struct {
	X *float64 `json:"x"`
	Y *float64 `json:"y"`
}

// OpenwopDefPort is a PortValue: static, expression, connection or variable.
type OpenwopDefPort struct {
	Type         string          `json:"type"`
	Value        json.RawMessage `json:"value,omitempty"`
	Expression   string          `json:"expression,omitempty"`
	NodeID       string          `json:"nodeId,omitempty"`
	OutputKey    string          `json:"outputKey,omitempty"`
	VariableName string          `json:"variableName,omitempty"`
	Optional     *bool           `json:"optional,omitempty"`
}

// OpenwopDefEdge is a WorkflowEdge.
type OpenwopDefEdge struct {
	ID           string          `json:"id"`
	SourceNodeID string          `json:"sourceNodeId"`
	SourceOutput string          `json:"sourceOutput,omitempty"`
	TargetNodeID string          `json:"targetNodeId"`
	TargetInput  string          `json:"targetInput,omitempty"`
	Condition    json.RawMessage `json:"condition,omitempty"`
	Label        string          `json:"label,omitempty"`
	TriggerRule  string          `json:"triggerRule,omitempty"`
}

// OpenwopDefTrigger is a WorkflowTrigger.
type OpenwopDefTrigger struct {
	ID          string                     `json:"id"`
	Type        string                     `json:"type"`
	Name        string                     `json:"name,omitempty"`
	Description string                     `json:"description,omitempty"`
	Config      map[string]json.RawMessage `json:"config,omitempty"`
	Enabled     *bool                      `json:"enabled,omitempty"`
	NodeID      string                     `json:"nodeId,omitempty"`
	EventType   string                     `json:"eventType,omitempty"`
}

// OpenwopDefVariable is a WorkflowVariable.
type OpenwopDefVariable struct {
	Name         string          `json:"name"`
	Type         string          `json:"type"`
	Description  string          `json:"description,omitempty"`
	Required     bool            `json:"required,omitempty"`
	DefaultValue json.RawMessage `json:"defaultValue,omitempty"`
	Sensitive    bool            `json:"sensitive,omitempty"`
	Format       string          `json:"format,omitempty"`
}

// OpenwopDefMetadata is WorkflowMetadata; the schema allows other keys,
// kept as they are.
type OpenwopDefMetadata map[string]json.RawMessage

// OpenwopDefSettings is WorkflowSettings; the schema allows other keys.
type OpenwopDefSettings map[string]json.RawMessage

var (
	defIDPattern     = regexp.MustCompile(`^[a-z][a-z0-9_-]*$`)
	defSlugPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	defTypeIDPattern = regexp.MustCompile(`^[a-z][a-zA-Z0-9._-]*$`)
	defTriggerTypes  = []string{"manual", "schedule", "webhook", "event", "artifact", "canvas", "envelope", "command", "chat-message", "channel-write"}
	defEdgeRules     = []string{"all_success", "any_success", "all_complete", "none_failed", "any_failed"}
)

// unsupported is an *Error of ErrUnsupported naming field.
func unsupported(op, field, format string, args ...any) *Error {
	e := Invalid(op, field, format, args...)
	e.Err.(*reason).kind = ErrUnsupported
	return e
}

// OpenwopFromDefinition checks d against the rules of openwop's
// workflow-definition schema (ErrValidation, naming the field) and
// returns the workflow packrun runs: its nodes in an order that respects
// every edge (the schema's DAG; a node failure fails the run), its
// variables, and the nodes' static and variable input ports. It refuses
// (ErrUnsupported, naming the field) what packrun cannot execute: a
// trigger other than manual (runs start with POST /v1/runs), edge
// conditions, trigger rules other than all_success, data passed along
// edges (sourceOutput, targetInput), expression and connection ports,
// disabled nodes, credentialsRef, sensitive variables, channels, a
// configurableSchema, defaults, and settings.maxRetries above 0.
func OpenwopFromDefinition(op string, d *OpenwopDefinition) (*OpenwopWorkflow, error) {
	switch {
	case d.ID == "" || len(d.ID) > 128 || !defIDPattern.MatchString(d.ID):
		return nil, Invalid(op, "id", "is required: 1 to 128 characters, a lowercase letter then lowercase letters, digits, '_' and '-'")
	case d.Name == "" || len(d.Name) > 256:
		return nil, Invalid(op, "name", "is required: 1 to 256 characters")
	case d.Version == "":
		return nil, Invalid(op, "version", "is required")
	case d.Status != "" && !slices.Contains([]string{"active", "inactive", "draft", "archived"}, d.Status):
		return nil, Invalid(op, "status", "must be active, inactive, draft or archived")
	case d.Slug != "" && !defSlugPattern.MatchString(d.Slug):
		return nil, Invalid(op, "slug", "must be lowercase letters, digits, '_' and '-'")
	case d.Nodes == nil:
		return nil, Invalid(op, "nodes", "is required")
	case d.Edges == nil:
		return nil, Invalid(op, "edges", "is required (an array; [] for none)")
	case d.Triggers == nil:
		return nil, Invalid(op, "triggers", "is required (an array)")
	case d.Variables == nil:
		return nil, Invalid(op, "variables", "is required (an array; [] for none)")
	case d.Metadata == nil:
		return nil, Invalid(op, "metadata", "is required (an object)")
	case d.Settings == nil:
		return nil, Invalid(op, "settings", "is required (an object)")
	}
	for _, f := range []struct{ name, v string }{{"createdAt", d.CreatedAt}, {"updatedAt", d.UpdatedAt}} {
		if _, err := time.Parse(time.RFC3339, f.v); f.v != "" && err != nil {
			return nil, Invalid(op, f.name, "must be an RFC 3339 date-time")
		}
	}
	if err := checkDefSettings(op, *d.Settings); err != nil {
		return nil, err
	}
	if err := checkDefMetadata(op, *d.Metadata); err != nil {
		return nil, err
	}
	if len(d.Channels) > 0 {
		return nil, unsupported(op, "channels", "packrun does not run channel-aware workflows")
	}
	if len(d.ConfigurableSchema) > 0 && string(d.ConfigurableSchema) != "null" {
		return nil, unsupported(op, "configurableSchema", "packrun does not validate a run's configurable against a schema")
	}
	if len(d.Defaults) > 0 && string(d.Defaults) != "null" && string(d.Defaults) != "{}" {
		return nil, unsupported(op, "defaults", "packrun resolves no prompt references")
	}
	w := &OpenwopWorkflow{WorkflowID: d.ID}
	for i, v := range d.Variables {
		f := "variables[" + itoa(i) + "]"
		switch {
		case v.Name == "":
			return nil, Invalid(op, f+".name", "is required")
		case !openwopVariableTypes[v.Type]:
			return nil, Invalid(op, f+".type", "must be string, number, boolean, object or array")
		case v.Sensitive:
			return nil, unsupported(op, f+".sensitive", "packrun does not mask variables in its event log")
		}
		w.Variables = append(w.Variables, OpenwopVariable{Name: v.Name, Type: v.Type, Required: v.Required, DefaultValue: v.DefaultValue})
	}
	for i, tr := range d.Triggers {
		f := "triggers[" + itoa(i) + "]"
		switch {
		case tr.ID == "":
			return nil, Invalid(op, f+".id", "is required")
		case !slices.Contains(defTriggerTypes, tr.Type):
			return nil, Invalid(op, f+".type", "must be one of %s", strings.Join(defTriggerTypes, ", "))
		case tr.Type != "manual" && (tr.Enabled == nil || *tr.Enabled):
			return nil, unsupported(op, f+".type", "packrun starts runs with POST /v1/runs only (a manual trigger), not %q", tr.Type)
		}
	}
	nodes, err := defNodes(op, d.Nodes)
	if err != nil {
		return nil, err
	}
	order, err := defOrder(op, d.Nodes, d.Edges)
	if err != nil {
		return nil, err
	}
	for _, i := range order {
		w.Nodes = append(w.Nodes, nodes[i])
	}
	if err := ValidateOpenwopWorkflow(op, w); err != nil {
		return nil, err
	}
	return w, nil
}

func checkDefSettings(op string, s OpenwopDefSettings) error {
	for _, k := range []string{"timeout", "maxRetries", "maxLoopbackIterations"} {
		v, ok := s[k]
		if !ok {
			continue
		}
		var n float64
		if json.Unmarshal(v, &n) != nil || n != float64(int64(n)) || n < 0 || k == "maxLoopbackIterations" && n < 1 {
			return Invalid(op, "settings."+k, "must be a whole number of at least %d", map[bool]int{true: 1, false: 0}[k == "maxLoopbackIterations"])
		}
		if k == "maxRetries" && n > 0 {
			return unsupported(op, "settings.maxRetries", "packrun does not retry a run's nodes; 0 or left out")
		}
	}
	if v, ok := s["logLevel"]; ok {
		var l string
		if json.Unmarshal(v, &l) != nil || !slices.Contains([]string{"debug", "info", "warn", "error"}, l) {
			return Invalid(op, "settings.logLevel", "must be debug, info, warn or error")
		}
	}
	return nil
}

func checkDefMetadata(op string, m OpenwopDefMetadata) error {
	v, ok := m["tags"]
	if !ok {
		return nil
	}
	var tags []string
	if json.Unmarshal(v, &tags) != nil || len(tags) > 100 {
		return Invalid(op, "metadata.tags", "must be at most 100 strings")
	}
	for i, t := range tags {
		if t == "" || len(t) > 256 {
			return Invalid(op, "metadata.tags["+itoa(i)+"]", "must be 1 to 256 characters")
		}
	}
	return nil
}

// defNodes checks the nodes and turns each into an OpenwopNode.
func defNodes(op string, in []OpenwopDefNode) ([]OpenwopNode, error) {
	if len(in) == 0 {
		return nil, Invalid(op, "nodes", "must list at least one node")
	}
	out := make([]OpenwopNode, len(in))
	for i, n := range in {
		f := "nodes[" + itoa(i) + "]"
		switch {
		case n.ID == "":
			return nil, Invalid(op, f+".id", "is required")
		case !defTypeIDPattern.MatchString(n.TypeID):
			return nil, Invalid(op, f+".typeId", "is required: a lowercase letter, then letters, digits, '.', '_' and '-'")
		case n.Name == "":
			return nil, Invalid(op, f+".name", "is required")
		case n.Position == nil || n.Position.X == nil || n.Position.Y == nil:
			return nil, Invalid(op, f+".position", "is required: {x, y}")
		case n.Config == nil:
			return nil, Invalid(op, f+".config", "is required (an object)")
		case n.Inputs == nil:
			return nil, Invalid(op, f+".inputs", "is required (an object)")
		case n.OutputRole != "" && n.OutputRole != "primary" && n.OutputRole != "secondary":
			return nil, Invalid(op, f+".outputRole", "must be primary or secondary")
		case n.Disabled:
			return nil, unsupported(op, f+".disabled", "packrun runs every node of a workflow")
		case n.CredentialsRef != "":
			return nil, unsupported(op, f+".credentialsRef", "packrun resolves no credentials for a node")
		}
		out[i] = OpenwopNode{ID: n.ID, TypeID: n.TypeID}
		for name, p := range n.Inputs {
			pf := f + ".inputs." + ShortName(name)
			port, err := defPort(op, pf, p)
			if err != nil {
				return nil, err
			}
			if out[i].Inputs == nil {
				out[i].Inputs = map[string]OpenwopPort{}
			}
			out[i].Inputs[name] = port
		}
	}
	return out, nil
}

// defPort checks a PortValue against the branch its type chooses.
func defPort(op, f string, p OpenwopDefPort) (OpenwopPort, error) {
	extra := func(ok ...bool) bool { // a field of another branch is set
		return slices.Contains(ok, false)
	}
	switch p.Type {
	case "static":
		if p.Value == nil || extra(p.Expression == "", p.NodeID == "", p.OutputKey == "", p.VariableName == "", p.Optional == nil) {
			return OpenwopPort{}, Invalid(op, f, "a static port is {type, value}")
		}
		return OpenwopPort{Type: "static", Value: p.Value}, nil
	case "variable":
		if p.VariableName == "" || extra(p.Value == nil, p.Expression == "", p.NodeID == "", p.OutputKey == "") {
			return OpenwopPort{}, Invalid(op, f, "a variable port is {type, variableName, optional?}")
		}
		return OpenwopPort{Type: "variable", VariableName: p.VariableName, Optional: p.Optional != nil && *p.Optional}, nil
	case "expression":
		if p.Expression == "" || extra(p.Value == nil, p.NodeID == "", p.OutputKey == "", p.VariableName == "", p.Optional == nil) {
			return OpenwopPort{}, Invalid(op, f, "an expression port is {type, expression}")
		}
		return OpenwopPort{}, unsupported(op, f, "packrun does not evaluate expressions; use a static or variable port")
	case "connection":
		if p.NodeID == "" || p.OutputKey == "" || extra(p.Value == nil, p.Expression == "", p.VariableName == "") {
			return OpenwopPort{}, Invalid(op, f, "a connection port is {type, nodeId, outputKey, optional?}")
		}
		return OpenwopPort{}, unsupported(op, f, "packrun does not pass node outputs to other nodes; use a static or variable port")
	}
	return OpenwopPort{}, Invalid(op, f+".type", "must be static, expression, connection or variable")
}

// defOrder checks the edges and orders the nodes so that every edge's
// source comes before its target, the listed order kept where the
// edges leave it free; a cycle is refused.
func defOrder(op string, nodes []OpenwopDefNode, edges []OpenwopDefEdge) ([]int, error) {
	index := map[string]int{}
	for i, n := range nodes {
		if _, dup := index[n.ID]; dup {
			return nil, Invalid(op, "nodes["+itoa(i)+"].id", "must be unique within the workflow")
		}
		index[n.ID] = i
	}
	preds := make([]int, len(nodes))
	next := make([][]int, len(nodes))
	for i, e := range edges {
		f := "edges[" + itoa(i) + "]"
		src, okS := index[e.SourceNodeID]
		dst, okD := index[e.TargetNodeID]
		switch {
		case e.ID == "":
			return nil, Invalid(op, f+".id", "is required")
		case !okS:
			return nil, Invalid(op, f+".sourceNodeId", "names no node of the workflow")
		case !okD:
			return nil, Invalid(op, f+".targetNodeId", "names no node of the workflow")
		case e.TriggerRule != "" && !slices.Contains(defEdgeRules, e.TriggerRule):
			return nil, Invalid(op, f+".triggerRule", "must be one of %s", strings.Join(defEdgeRules, ", "))
		case len(e.Condition) > 0 && string(e.Condition) != "null":
			return nil, unsupported(op, f+".condition", "packrun does not evaluate edge conditions")
		case e.TriggerRule != "" && e.TriggerRule != "all_success":
			return nil, unsupported(op, f+".triggerRule", "packrun runs a node once all before it succeeded (all_success) only")
		case e.SourceOutput != "" || e.TargetInput != "":
			return nil, unsupported(op, f, "packrun does not pass node outputs along edges (sourceOutput, targetInput); a node takes the run's inputs")
		}
		preds[dst]++
		next[src] = append(next[src], dst)
	}
	var order []int
	done := make([]bool, len(nodes))
	for len(order) < len(nodes) {
		picked := -1
		for i := range nodes {
			if !done[i] && preds[i] == 0 {
				picked = i
				break
			}
		}
		if picked < 0 {
			return nil, Invalid(op, "edges", "form a cycle; a workflow is a directed acyclic graph")
		}
		done[picked] = true
		order = append(order, picked)
		for _, j := range next[picked] {
			preds[j]--
		}
	}
	return order, nil
}

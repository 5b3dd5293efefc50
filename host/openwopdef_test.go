package host

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// publishedChain is a definition in openwop's published shape: three
// nodes listed out of order, ordered by their edges, a variable with a
// default bound to a port, a static port, a manual trigger, metadata and
// settings.
const publishedChain = `{
  "id": "published-chain", "name": "Published chain", "version": "1.0.0",
  "description": "three nodes", "status": "active",
  "nodes": [
    {"id": "c", "typeId": "core.noop", "name": "C", "position": {"x": 400, "y": 0}, "config": {}, "inputs": {}},
    {"id": "a", "typeId": "core.delay", "name": "A", "position": {"x": 0, "y": 0}, "config": {},
     "inputs": {"delayMs": {"type": "variable", "variableName": "delayMs"}, "label": {"type": "static", "value": "x"}}},
    {"id": "b", "typeId": "core.noop", "name": "B", "position": {"x": 200, "y": 0}, "config": {}, "inputs": {}}
  ],
  "edges": [
    {"id": "ab", "sourceNodeId": "a", "targetNodeId": "b"},
    {"id": "bc", "sourceNodeId": "b", "targetNodeId": "c", "triggerRule": "all_success"}
  ],
  "triggers": [{"id": "manual", "type": "manual", "enabled": true}, {"id": "nightly", "type": "schedule", "enabled": false}],
  "variables": [{"name": "delayMs", "type": "number", "required": true, "defaultValue": 5, "description": "ms"}],
  "groups": [{"id": "g", "name": "G", "nodeIds": ["a"], "position": {"x": 0, "y": 0}, "size": {"width": 1, "height": 1}}],
  "metadata": {"tags": ["conformance"], "author": "someone"},
  "settings": {"timeout": 10000, "maxRetries": 0, "logLevel": "info"}
}`

func decodeDef(t *testing.T, s string) *OpenwopDefinition {
	t.Helper()
	var d OpenwopDefinition
	dec := json.NewDecoder(strings.NewReader(s))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return &d
}

// edit applies f to publishedChain decoded as a generic object.
func edit(t *testing.T, f func(m map[string]any)) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(publishedChain), &m); err != nil {
		t.Fatal(err)
	}
	f(m)
	b, _ := json.Marshal(m)
	return string(b)
}

func node(m map[string]any, i int) map[string]any { return m["nodes"].([]any)[i].(map[string]any) }
func edge(m map[string]any, i int) map[string]any { return m["edges"].([]any)[i].(map[string]any) }

func TestOpenwopFromDefinition(t *testing.T) {
	w, err := OpenwopFromDefinition("put", decodeDef(t, publishedChain))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range w.Nodes {
		ids = append(ids, n.ID)
	}
	if w.WorkflowID != "published-chain" || strings.Join(ids, ",") != "a,b,c" {
		t.Fatalf("workflow %s, nodes %v; want a,b,c in edge order", w.WorkflowID, ids)
	}
	if p := w.Nodes[0].Inputs; p["delayMs"].VariableName != "delayMs" || string(p["label"].Value) != `"x"` || len(w.Nodes[1].Inputs) != 0 {
		t.Fatalf("ports %+v", p)
	}
	if len(w.Variables) != 1 || string(w.Variables[0].DefaultValue) != "5" || !w.Variables[0].Required {
		t.Fatalf("variables %+v", w.Variables)
	}
	// No edges: the listed order.
	w, err = OpenwopFromDefinition("put", decodeDef(t, edit(t, func(m map[string]any) { m["edges"] = []any{} })))
	if err != nil || w.Nodes[0].ID != "c" || w.Nodes[2].ID != "b" {
		t.Fatalf("no edges: %+v %v", w, err)
	}

	for _, c := range []struct {
		name, field string
		kind        error
		f           func(m map[string]any)
	}{
		{"id missing", "id", ErrValidation, func(m map[string]any) { delete(m, "id") }},
		{"id pattern", "id", ErrValidation, func(m map[string]any) { m["id"] = "Upper" }},
		{"name missing", "name", ErrValidation, func(m map[string]any) { delete(m, "name") }},
		{"version missing", "version", ErrValidation, func(m map[string]any) { delete(m, "version") }},
		{"status", "status", ErrValidation, func(m map[string]any) { m["status"] = "gone" }},
		{"edges missing", "edges", ErrValidation, func(m map[string]any) { delete(m, "edges") }},
		{"triggers missing", "triggers", ErrValidation, func(m map[string]any) { delete(m, "triggers") }},
		{"variables missing", "variables", ErrValidation, func(m map[string]any) { delete(m, "variables") }},
		{"metadata missing", "metadata", ErrValidation, func(m map[string]any) { delete(m, "metadata") }},
		{"settings missing", "settings", ErrValidation, func(m map[string]any) { delete(m, "settings") }},
		{"no nodes", "nodes", ErrValidation, func(m map[string]any) { m["nodes"] = []any{} }},
		{"node name", "nodes[0].name", ErrValidation, func(m map[string]any) { delete(node(m, 0), "name") }},
		{"node position", "nodes[1].position", ErrValidation, func(m map[string]any) { node(m, 1)["position"] = map[string]any{"x": 1} }},
		{"node config", "nodes[0].config", ErrValidation, func(m map[string]any) { delete(node(m, 0), "config") }},
		{"node inputs", "nodes[0].inputs", ErrValidation, func(m map[string]any) { delete(node(m, 0), "inputs") }},
		{"typeId pattern", "nodes[0].typeId", ErrValidation, func(m map[string]any) { node(m, 0)["typeId"] = "Core.noop" }},
		{"duplicate node", "nodes[2].id", ErrValidation, func(m map[string]any) { node(m, 2)["id"] = "c" }},
		{"edge to nothing", "edges[0].targetNodeId", ErrValidation, func(m map[string]any) { edge(m, 0)["targetNodeId"] = "zz" }},
		{"cycle", "edges", ErrValidation, func(m map[string]any) {
			m["edges"] = append(m["edges"].([]any), map[string]any{"id": "ca", "sourceNodeId": "c", "targetNodeId": "a"})
		}},
		{"trigger type", "triggers[0].type", ErrValidation, func(m map[string]any) { m["triggers"].([]any)[0].(map[string]any)["type"] = "cron" }},
		{"variable type", "variables[0].type", ErrValidation, func(m map[string]any) { m["variables"].([]any)[0].(map[string]any)["type"] = "int" }},
		{"default of another type", "variables[0].defaultValue", ErrValidation, func(m map[string]any) { m["variables"].([]any)[0].(map[string]any)["defaultValue"] = "5" }},
		{"port of no variable", "nodes[0].inputs.delayMs.variableName", ErrValidation, func(m map[string]any) {
			node(m, 1)["inputs"].(map[string]any)["delayMs"] = map[string]any{"type": "variable", "variableName": "nope"}
			m["nodes"].([]any)[0], m["nodes"].([]any)[1] = m["nodes"].([]any)[1], m["nodes"].([]any)[0]
		}},
		{"port of two branches", "nodes[1].inputs.label", ErrValidation, func(m map[string]any) {
			node(m, 1)["inputs"].(map[string]any)["label"] = map[string]any{"type": "static", "value": 1, "variableName": "delayMs"}
		}},
		{"settings.timeout", "settings.timeout", ErrValidation, func(m map[string]any) { m["settings"].(map[string]any)["timeout"] = -1 }},
		{"metadata.tags", "metadata.tags[0]", ErrValidation, func(m map[string]any) { m["metadata"].(map[string]any)["tags"] = []any{""} }},
		// What packrun cannot execute.
		{"schedule trigger", "triggers[1].type", ErrUnsupported, func(m map[string]any) { m["triggers"].([]any)[1].(map[string]any)["enabled"] = true }},
		{"edge condition", "edges[0].condition", ErrUnsupported, func(m map[string]any) { edge(m, 0)["condition"] = map[string]any{"type": "truthy", "left": "x"} }},
		{"trigger rule", "edges[1].triggerRule", ErrUnsupported, func(m map[string]any) { edge(m, 1)["triggerRule"] = "any_failed" }},
		{"data along an edge", "edges[0]", ErrUnsupported, func(m map[string]any) { edge(m, 0)["targetInput"] = "in" }},
		{"expression port", "nodes[0].inputs.e", ErrUnsupported, func(m map[string]any) {
			node(m, 0)["inputs"] = map[string]any{"e": map[string]any{"type": "expression", "expression": "1+1"}}
		}},
		{"connection port", "nodes[0].inputs.e", ErrUnsupported, func(m map[string]any) {
			node(m, 0)["inputs"] = map[string]any{"e": map[string]any{"type": "connection", "nodeId": "a", "outputKey": "out"}}
		}},
		{"disabled node", "nodes[2].disabled", ErrUnsupported, func(m map[string]any) { node(m, 2)["disabled"] = true }},
		{"credentials", "nodes[0].credentialsRef", ErrUnsupported, func(m map[string]any) { node(m, 0)["credentialsRef"] = "k" }},
		{"sensitive variable", "variables[0].sensitive", ErrUnsupported, func(m map[string]any) { m["variables"].([]any)[0].(map[string]any)["sensitive"] = true }},
		{"channels", "channels", ErrUnsupported, func(m map[string]any) { m["channels"] = map[string]any{"c": map[string]any{"reducer": "append"}} }},
		{"configurableSchema", "configurableSchema", ErrUnsupported, func(m map[string]any) { m["configurableSchema"] = map[string]any{"type": "object"} }},
		{"retries", "settings.maxRetries", ErrUnsupported, func(m map[string]any) { m["settings"].(map[string]any)["maxRetries"] = 2 }},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := OpenwopFromDefinition("put", decodeDef(t, edit(t, c.f)))
			var he *Error
			if !errors.Is(err, c.kind) || !errors.As(err, &he) || he.Field != c.field || strings.Contains(err.Error(), "\n") {
				t.Fatalf("%v (field %q), want %v naming %s", err, fieldOf(he), c.kind, c.field)
			}
			if c.kind == ErrUnsupported && errors.Is(err, ErrValidation) {
				t.Fatalf("%v is both invalid and unsupported", err)
			}
		})
	}
}

// FuzzOpenwopDefinition: no input makes the decoder and
// OpenwopFromDefinition panic, and an accepted definition is a valid
// OpenwopWorkflow whose nodes are those given, each once.
func FuzzOpenwopDefinition(f *testing.F) {
	f.Add([]byte(publishedChain))
	f.Add([]byte(`{"id":"x","name":"n","version":"1","nodes":[{"id":"a","typeId":"core.noop","name":"a","position":{"x":0,"y":0},"config":{},"inputs":{}}],"edges":[{"id":"e","sourceNodeId":"a","targetNodeId":"a"}],"triggers":[],"variables":[],"metadata":{},"settings":{}}`))
	f.Add([]byte(`{"id":"x","nodes":[{"inputs":{"p":{"type":"connection","nodeId":"a","outputKey":"o"}}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var d OpenwopDefinition
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if dec.Decode(&d) != nil {
			return
		}
		w, err := OpenwopFromDefinition("put", &d)
		if err != nil {
			var he *Error
			if !errors.As(err, &he) || !errors.Is(err, ErrValidation) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("error %v is neither invalid nor unsupported", err)
			}
			return
		}
		if err := ValidateOpenwopWorkflow("put", w); err != nil || len(w.Nodes) != len(d.Nodes) {
			t.Fatalf("accepted %s as %+v: %v", b, w, err)
		}
	})
}

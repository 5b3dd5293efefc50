package packs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/packrun/packrun/internal/strictjson"
	"github.com/packrun/packrun/internal/textclip"
)

// maxDepth bounds JSON nesting in pack.json (schemas included).
const maxDepth = 128

// DecodeManifest parses and validates pack.json. Input larger than
// MaxManifestBytes is refused before parsing. It must be one UTF-8 JSON
// object without duplicate keys or unknown fields. On failure the error is a
// *ValidationError listing every problem found.
func DecodeManifest(b []byte) (*Manifest, error) {
	if len(b) > MaxManifestBytes {
		return nil, &ValidationError{Problems: []Problem{{"$", fmt.Sprintf("manifest is %d bytes, more than the %d allowed", len(b), MaxManifestBytes)}}}
	}
	if !utf8.Valid(b) {
		return nil, &ValidationError{Problems: []Problem{{"$", "not valid UTF-8"}}}
	}
	c := &checker{}
	tree, err := parseJSON(b, c)
	if err != nil {
		return nil, &ValidationError{Problems: []Problem{{"$", textclip.Clip("not valid JSON: "+err.Error(), maxProblemText)}}}
	}
	m := c.manifest(tree)
	if m != nil {
		m.check(c)
	}
	if len(c.problems) > 0 {
		return nil, &ValidationError{Problems: c.problems}
	}
	return m, nil
}

// DecodeStoredManifest decodes a manifest DecodeManifest accepted before,
// such as the one the store kept when the pack was installed, without
// validating it again: no schema is compiled and no pattern matched. Use
// DecodeManifest for anything that did not pass it.
func DecodeStoredManifest(b []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("stored manifest: %w", err)
	}
	for i, n := range m.Nodes {
		for _, s := range []*json.RawMessage{&m.Nodes[i].InputSchema, &m.Nodes[i].OutputSchema} {
			if *s == nil {
				continue
			}
			var buf bytes.Buffer
			if err := json.Compact(&buf, *s); err != nil {
				return nil, fmt.Errorf("stored manifest: node %s: %w", n.TypeID, err)
			}
			*s = buf.Bytes()
		}
	}
	return &m, nil
}

// checker collects problems: at most one per path, and none below a path
// that already has one (a value of the wrong type is not also "missing" its
// fields). Paths and messages are cut to maxProblemPath and maxProblemText
// bytes.
type checker struct {
	problems []Problem
	paths    map[string]bool // the paths of problems
}

func (c *checker) add(path, format string, args ...any) {
	path = textclip.Clip(path, maxProblemPath)
	if c.covered(path) {
		return
	}
	if c.paths == nil {
		c.paths = map[string]bool{}
	}
	c.paths[path] = true
	c.problems = append(c.problems, Problem{Path: path, Message: textclip.Clip(fmt.Sprintf(format, args...), maxProblemText)})
}

// covered reports whether path, or a path above it, has a problem. It looks
// up each ancestor ($.a[1].b: $, $.a, $.a[1]), skipping over quoted keys
// ($["x.y"]): one lookup per level rather than one per problem found.
func (c *checker) covered(path string) bool {
	for i := 1; i < len(path); i++ {
		if path[i] != '.' && path[i] != '[' {
			continue
		}
		if c.paths[path[:i]] {
			return true
		}
		if strings.HasPrefix(path[i:], `["`) {
			q, err := strconv.QuotedPrefix(path[i+1:])
			if err != nil { // cut by clip: no level below to find
				break
			}
			i += len(q)
		}
	}
	return c.paths[path]
}

func fieldPath(parent, key string) string { return strictjson.FieldPath(parent, key) }

func indexPath(parent string, i int) string { return strictjson.IndexPath(parent, i) }

func typeName(v any) string { return strictjson.TypeName(v) }

// parseJSON decodes pack.json; duplicate keys are problems.
func parseJSON(b []byte, c *checker) (any, error) {
	return strictjson.Parse(b, maxDepth, func(path string) { c.add(path, "duplicate key") })
}

// object checks that v is an object with only the given fields and returns it.
func (c *checker) object(path string, v any, fields ...string) (map[string]any, bool) {
	obj, ok := v.(*strictjson.Object)
	var o map[string]any
	if ok {
		o = obj.Vals
	}
	if !ok {
		c.add(path, "must be an object, not %s", typeName(v))
		return nil, false
	}
	keys := make([]string, 0, len(o))
	for k := range o {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(fields, k) {
			c.add(fieldPath(path, textclip.Clip(k, maxEcho)), "unknown field")
		}
	}
	return o, true
}

// field returns o[key], reporting a missing required field.
func (c *checker) field(o map[string]any, path, key string, required bool) (any, string, bool) {
	p := fieldPath(path, key)
	v, ok := o[key]
	if !ok && required {
		c.add(p, "required")
	}
	return v, p, ok
}

func (c *checker) str(o map[string]any, path, key string, required bool) string {
	v, p, ok := c.field(o, path, key, required)
	if !ok {
		return ""
	}
	return c.strValue(p, v)
}

func (c *checker) strValue(p string, v any) string {
	s, ok := v.(string)
	if !ok {
		c.add(p, "must be a string, not %s", typeName(v))
	}
	return s
}

func (c *checker) strs(o map[string]any, path, key string) []string {
	v, p, ok := c.field(o, path, key, false)
	if !ok {
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		c.add(p, "must be an array of strings, not %s", typeName(v))
		return nil
	}
	out := make([]string, len(a))
	for i, e := range a {
		out[i] = c.strValue(indexPath(p, i), e)
	}
	return out
}

// integer reads an integral JSON number in [lo, hi].
func (c *checker) integer(o map[string]any, path, key string, required bool, lo, hi int64) int64 {
	v, p, ok := c.field(o, path, key, required)
	if !ok {
		return 0
	}
	n, ok := v.(json.Number)
	if !ok {
		c.add(p, "must be an integer, not %s", typeName(v))
		return 0
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		// 1.0 and 1e3 are integers in JSON Schema.
		f, ferr := strconv.ParseFloat(string(n), 64)
		switch {
		case ferr != nil && !errors.Is(ferr, strconv.ErrRange), f != math.Trunc(f):
			c.add(p, "must be an integer")
			return 0
		case math.Abs(f) > maxSafeInt:
			c.add(p, "must be between %d and %d", lo, hi)
			return 0
		}
		i = int64(f)
	}
	if i < lo || i > hi {
		c.add(p, "must be between %d and %d", lo, hi)
		return 0
	}
	return i
}

// schema reads a JSON Schema value (object or boolean) and re-encodes it.
func (c *checker) schema(o map[string]any, path, key string) json.RawMessage {
	v, p, ok := c.field(o, path, key, false)
	if !ok {
		return nil
	}
	switch v.(type) {
	case *strictjson.Object, bool:
	default:
		c.add(p, "must be a JSON Schema (an object or a boolean), not %s", typeName(v))
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		c.add(p, "cannot be encoded: %v", err)
		return nil
	}
	return b
}

func (c *checker) array(o map[string]any, path, key string, required bool) ([]any, string) {
	v, p, ok := c.field(o, path, key, required)
	if !ok {
		return nil, p
	}
	a, ok := v.([]any)
	if !ok {
		c.add(p, "must be an array, not %s", typeName(v))
	}
	return a, p
}

// manifest maps the parsed tree onto a Manifest, reporting unknown fields,
// missing required fields and wrong types. The rest is Manifest.check.
func (c *checker) manifest(v any) *Manifest {
	o, ok := c.object("$", v, "name", "version", "description", "license", "runtime", "nodes", "grants")
	if !ok {
		return nil
	}
	m := c.identity(o)
	if rv, p, ok := c.field(o, "$", "runtime", true); ok {
		m.Runtime = c.runtime(p, rv)
	}
	nodes, np := c.array(o, "$", "nodes", true)
	for i, nv := range nodes {
		m.Nodes = append(m.Nodes, c.node(indexPath(np, i), nv))
	}
	if gv, p, ok := c.field(o, "$", "grants", false); ok {
		if g, ok := c.object(p, gv, "services", "adapters", "memoryNamespaces", "topics", "http"); ok {
			for _, s := range c.strs(g, p, "services") {
				m.Grants.Services = append(m.Grants.Services, Service(s))
			}
			m.Grants.Adapters = c.strs(g, p, "adapters")
			m.Grants.MemoryNamespaces = c.strs(g, p, "memoryNamespaces")
			m.Grants.Topics = c.strs(g, p, "topics")
			hs, hp := c.array(g, p, "http", false)
			for i, hv := range hs {
				m.Grants.HTTP = append(m.Grants.HTTP, c.httpGrant(indexPath(hp, i), hv))
			}
		}
	}
	return m
}

// httpGrant reads one entry of grants.http; Manifest.check does the rest.
func (c *checker) httpGrant(p string, v any) HTTPGrant {
	var g HTTPGrant
	o, ok := c.object(p, v, "scheme", "host", "port", "pathPrefix", "methods", "allowRanges", "secrets")
	if !ok {
		return g
	}
	g.Scheme = c.str(o, p, "scheme", false)
	g.Host = c.str(o, p, "host", true)
	g.Port = int(c.integer(o, p, "port", false, 1, 65535))
	g.PathPrefix = c.str(o, p, "pathPrefix", false)
	g.Methods = c.strs(o, p, "methods")
	g.AllowRanges = c.strs(o, p, "allowRanges")
	ss, sp := c.array(o, p, "secrets", false)
	for i, sv := range ss {
		ip := indexPath(sp, i)
		var s HTTPSecret
		if so, ok := c.object(ip, sv, "name", "bearer", "header", "query"); ok {
			s.Name = c.str(so, ip, "name", true)
			s.Bearer = c.boolean(so, ip, "bearer")
			s.Header = c.str(so, ip, "header", false)
			s.Query = c.str(so, ip, "query", false)
		}
		g.Secrets = append(g.Secrets, s)
	}
	return g
}

func (c *checker) boolean(o map[string]any, path, key string) bool {
	v, p, ok := c.field(o, path, key, false)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		c.add(p, "must be a boolean, not %s", typeName(v))
	}
	return b
}

// identity reads the members packrun and openwop manifests share: name,
// version, description and license.
func (c *checker) identity(o map[string]any) *Manifest {
	return &Manifest{
		Name:        c.str(o, "$", "name", true),
		Version:     c.str(o, "$", "version", true),
		Description: c.str(o, "$", "description", false),
		License:     c.str(o, "$", "license", false),
	}
}

func (c *checker) runtime(path string, v any) Runtime {
	var r Runtime
	o, ok := c.object(path, v, "language", "abi", "modules", "limits")
	if !ok {
		return r
	}
	r.Language = c.str(o, path, "language", true)
	if av, p, ok := c.field(o, path, "abi", true); ok {
		if a, ok := c.object(p, av, "version", "minor"); ok {
			r.ABI.Version = int(c.integer(a, p, "version", true, 0, math.MaxInt32))
			r.ABI.Minor = int(c.integer(a, p, "minor", true, 0, math.MaxInt32))
		}
	}
	mods, mp := c.array(o, path, "modules", true)
	for i, mv := range mods {
		p := indexPath(mp, i)
		if mo, ok := c.object(p, mv, "path", "sha256"); ok {
			r.Modules = append(r.Modules, Module{Path: c.str(mo, p, "path", true), SHA256: c.str(mo, p, "sha256", true)})
		} else {
			r.Modules = append(r.Modules, Module{})
		}
	}
	if lv, p, ok := c.field(o, path, "limits", false); ok {
		if l, ok := c.object(p, lv, "memoryPages", "timeoutMs", "outputBytes", "hostCalls"); ok {
			r.Limits = RuntimeLimits{
				MemoryPages: c.integer(l, p, "memoryPages", false, 1, maxMemoryPages),
				TimeoutMs:   c.integer(l, p, "timeoutMs", false, 1, maxTimeoutMs),
				OutputBytes: c.integer(l, p, "outputBytes", false, 1, maxSafeInt),
				HostCalls:   c.integer(l, p, "hostCalls", false, 1, maxSafeInt),
			}
		}
	}
	return r
}

func (c *checker) node(path string, v any) Node {
	o, ok := c.object(path, v, "typeId", "kind", "module", "export", "description", "inputSchema", "outputSchema", "taskTypes", "cadence", "skill", "subscribes")
	if !ok {
		return Node{}
	}
	module := c.str(o, path, "module", false)
	if _, set := o["module"]; set && module == "" {
		c.add(fieldPath(path, "module"), "must not be empty (leave it out to use the only module)")
	}
	return Node{
		TypeID:       c.str(o, path, "typeId", true),
		Kind:         Kind(c.str(o, path, "kind", true)),
		Module:       module,
		Export:       c.exportName(o, path),
		Description:  c.str(o, path, "description", false),
		InputSchema:  c.schema(o, path, "inputSchema"),
		OutputSchema: c.schema(o, path, "outputSchema"),
		TaskTypes:    c.strs(o, path, "taskTypes"),
		Cadence:      c.str(o, path, "cadence", false),
		Skill:        c.skill(o, path),
		Subscribes:   c.strs(o, path, "subscribes"),
	}
}

// skill reads a node's optional "skill": its SkillManifest.
func (c *checker) skill(o map[string]any, path string) *Skill {
	v, p, ok := c.field(o, path, "skill", false)
	if !ok {
		return nil
	}
	so, ok := c.object(p, v, "skill_id", "description", "tags", "instruction_path", "subagent_path",
		"cli_commands", "sensor_path", "input_schema_id", "output_schema_id")
	if !ok {
		return &Skill{}
	}
	s := &Skill{
		SkillID: c.str(so, p, "skill_id", false), Description: c.str(so, p, "description", false),
		Tags: c.strs(so, p, "tags"), InstructionPath: c.str(so, p, "instruction_path", false),
		SubagentPath: c.str(so, p, "subagent_path", false), SensorPath: c.str(so, p, "sensor_path", false),
		InputSchemaID: c.str(so, p, "input_schema_id", false), OutputSchemaID: c.str(so, p, "output_schema_id", false),
	}
	cmds, cp := c.array(so, p, "cli_commands", false)
	for i, cv := range cmds {
		ip := indexPath(cp, i)
		co, ok := c.object(ip, cv, "name", "command", "description")
		if !ok {
			s.CLICommands = append(s.CLICommands, CLICommand{})
			continue
		}
		s.CLICommands = append(s.CLICommands, CLICommand{Name: c.str(co, ip, "name", true),
			Command: c.str(co, ip, "command", true), Description: c.str(co, ip, "description", false)})
	}
	return s
}

// exportName reads a node's optional "export": the function of an Extism
// plugin module that serves the node.
func (c *checker) exportName(o map[string]any, path string) string {
	e := c.str(o, path, "export", false)
	if _, set := o["export"]; set && (e == "" || len(e) > 128 || strings.ContainsAny(e, " \t\n\"")) {
		c.add(fieldPath(path, "export"), "must be an exported function name (1..128 characters, no spaces)")
	}
	return e
}

package adapters

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/packrun/packrun/internal/strictjson"
)

// maxDepth bounds JSON nesting in adapters.json.
const maxDepth = 64

// checker collects problems: at most one per path, and none below a path
// that already has one (a value of the wrong type is not also "missing" its
// fields).
type checker struct {
	problems []Problem
	paths    map[string]bool
}

func (c *checker) add(path, format string, args ...any) {
	if c.paths[path] {
		return
	}
	for i := 1; i < len(path); i++ {
		if (path[i] == '.' || path[i] == '[') && c.paths[path[:i]] {
			return
		}
	}
	if c.paths == nil {
		c.paths = map[string]bool{}
	}
	c.paths[path] = true
	c.problems = append(c.problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

func fieldPath(parent, key string) string { return strictjson.FieldPath(parent, key) }

func indexPath(parent string, i int) string { return strictjson.IndexPath(parent, i) }

// object is a JSON object with its keys in document order.
type object = strictjson.Object

// parseJSON decodes adapters.json; duplicate keys are problems.
func parseJSON(b []byte, c *checker) (any, error) {
	return strictjson.Parse(b, maxDepth, func(path string) { c.add(path, "duplicate key") })
}

func decodeConfig(c *checker, tree any) *Config {
	cfg := &Config{}
	obj, ok := tree.(*object)
	if !ok {
		c.add("$", "must be an object {\"adapters\": [...]}")
		return cfg
	}
	for _, k := range obj.Keys {
		if k != "adapters" {
			c.add(fieldPath("$", k), "unknown field")
		}
	}
	v, ok := obj.Vals["adapters"]
	if !ok {
		return cfg
	}
	arr, ok := v.([]any)
	if !ok {
		c.add("$.adapters", "must be an array")
		return cfg
	}
	for i, el := range arr {
		cfg.Adapters = append(cfg.Adapters, decodeAdapter(c, indexPath("$.adapters", i), el))
	}
	return cfg
}

func decodeAdapter(c *checker, p string, v any) AdapterConfig {
	var a AdapterConfig
	obj, ok := v.(*object)
	if !ok {
		c.add(p, "must be an object")
		return a
	}
	// The kind decides which fields the adapter has.
	if s, ok := obj.Vals["kind"].(string); ok {
		a.Kind = Kind(s)
	}
	for _, k := range obj.Keys {
		fp := fieldPath(p, k)
		val := obj.Vals[k]
		if !isField(k) {
			c.add(fp, "unknown field")
			continue
		}
		if !hasField(a.Kind, k) {
			c.add(fp, "not allowed for kind %s", a.Kind)
			continue
		}
		switch k {
		case "adapter_id":
			a.AdapterID = str(c, fp, val)
		case "kind":
			a.Kind = Kind(str(c, fp, val))
		case "command":
			a.Command = str(c, fp, val)
		case "working_dir":
			a.WorkingDir = nonEmptyStr(c, fp, val)
		case "timeout_ms":
			a.TimeoutMS = integer(c, fp, val)
		case "sandbox":
			a.Sandbox = Sandbox(str(c, fp, val))
		case "env_file":
			a.EnvFile = nonEmptyStr(c, fp, val)
		case "env":
			a.Env = strMap(c, fp, val)
		case "model":
			a.Model = nonEmptyStr(c, fp, val)
		case "models":
			a.Models = strList(c, fp, val)
		case "provider":
			a.Provider = decodeProvider(c, fp, val)
		case "autonomy":
			a.Autonomy = decodeAutonomy(c, fp, val)
		case "extra_args":
			a.ExtraArgs = strList(c, fp, val)
		case "endpoint":
			a.Endpoint = str(c, fp, val)
		}
	}
	return a
}

// isField reports whether name is a field of any kind.
func isField(name string) bool {
	for _, fs := range fieldsOf {
		if slices.Contains(fs, name) {
			return true
		}
	}
	return false
}

func decodeAutonomy(c *checker, p string, v any) *Autonomy {
	obj, ok := v.(*object)
	if !ok {
		c.add(p, "must be an object")
		return nil
	}
	au := &Autonomy{}
	for _, k := range obj.Keys {
		fp := fieldPath(p, k)
		switch k {
		case "profile":
			au.Profile = Profile(str(c, fp, obj.Vals[k]))
		case "required_args":
			au.RequiredArgs = strList(c, fp, obj.Vals[k])
		case "required_settings_files":
			au.RequiredSettingsFiles = strList(c, fp, obj.Vals[k])
		default:
			c.add(fp, "unknown field")
		}
	}
	return au
}

func decodeProvider(c *checker, p string, v any) *Provider {
	obj, ok := v.(*object)
	if !ok {
		c.add(p, "must be an object")
		return nil
	}
	pr := &Provider{}
	for _, k := range obj.Keys {
		fp := fieldPath(p, k)
		val := obj.Vals[k]
		switch k {
		case "id":
			pr.ID = str(c, fp, val)
		case "name":
			pr.Name = str(c, fp, val)
		case "base_url":
			pr.BaseURL = str(c, fp, val)
		case "wire_api":
			pr.WireAPI = str(c, fp, val)
		case "requires_openai_auth":
			b, ok := val.(bool)
			if !ok {
				c.add(fp, "must be true or false")
				continue
			}
			pr.RequiresOpenAIAuth = &b
		default:
			c.add(fp, "unknown field")
		}
	}
	return pr
}

func str(c *checker, p string, v any) string {
	s, ok := v.(string)
	if !ok {
		c.add(p, "must be a string")
	}
	return s
}

// nonEmptyStr is for optional strings, where "" would read as absent.
func nonEmptyStr(c *checker, p string, v any) string {
	s := str(c, p, v)
	if s == "" {
		c.add(p, "must not be empty (leave the field out)")
	}
	return s
}

func integer(c *checker, p string, v any) int64 {
	n, ok := v.(json.Number)
	if !ok {
		c.add(p, "must be a number")
		return 0
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		if f, ferr := strconv.ParseFloat(string(n), 64); ferr == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f) // 1e3, 1000.0
		}
		c.add(p, "must be an integer")
		return 0
	}
	return i
}

func strList(c *checker, p string, v any) []string {
	arr, ok := v.([]any)
	if !ok {
		c.add(p, "must be an array of strings")
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, el := range arr {
		out = append(out, str(c, indexPath(p, i), el))
	}
	return out
}

func strMap(c *checker, p string, v any) map[string]string {
	obj, ok := v.(*object)
	if !ok {
		c.add(p, "must be an object of strings")
		return nil
	}
	out := make(map[string]string, len(obj.Keys))
	for _, k := range obj.Keys {
		out[k] = str(c, fieldPath(p, k), obj.Vals[k])
	}
	return out
}

// Package schema publishes the JSON Schemas of the agent runtime schema's records
// (agent-runtime/<record>/v1: task.intent, task.record, sensor.event, ...)
// and validates documents against them. The schema files live in
// agent-runtime/ beside this file, one per record, named
// <record>.v1.json; each one's "$id" is its versioned id. They reference
// each other by id ("$ref": "agent-runtime/task.intent/v1").
//
// The decoders of these records (host.DecodeIntent, the sensor event,
// schedule, agent and profile decoders) validate with the schema first, so
// the published contract and what packrun accepts cannot drift apart.
package schema

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/google/jsonschema-go/jsonschema"
)

//go:embed agent-runtime/*.json
var files embed.FS

// Base is the URL the ids are resolved against.
const Base = "https://packrun.dev/schema/"

// Error is a document that does not satisfy its schema. Path is the JSON
// path of the value at fault ("payload", "states[2].transitions[0].signal";
// "" for the document itself).
type Error struct {
	ID     string
	Path   string
	Reason string
}

func (e *Error) Error() string {
	if e.Path == "" {
		return fmt.Sprintf("%s: %s", e.ID, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", e.ID, e.Path, e.Reason)
}

var (
	once     sync.Once
	loadErr  error
	raw      map[string][]byte // id -> file
	resolved map[string]*jsonschema.Resolved
	mu       sync.Mutex
)

func load() {
	raw = map[string][]byte{}
	resolved = map[string]*jsonschema.Resolved{}
	loadErr = fs.WalkDir(files, "agent-runtime", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		var head struct {
			ID string `json:"$id"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		want := "agent-runtime/" + strings.TrimSuffix(strings.TrimSuffix(path.Base(p), ".json"), ".v1") + "/v1"
		if head.ID != want {
			return fmt.Errorf("%s: $id is %q, want %q", p, head.ID, want)
		}
		raw[head.ID] = b
		return nil
	})
}

// IDs returns the id of every published schema, sorted.
func IDs() []string {
	once.Do(load)
	ids := make([]string, 0, len(raw))
	for id := range raw {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Raw returns the schema document with the given id (nil if none).
func Raw(id string) []byte {
	once.Do(load)
	return slices.Clone(raw[id])
}

// loader resolves references between the published schemas and refuses
// anything else.
func loader(u *url.URL) (*jsonschema.Schema, error) {
	id := strings.TrimPrefix(u.String(), Base)
	b, ok := raw[id]
	if !ok {
		return nil, fmt.Errorf("no published schema %s", u)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	s.ID = Base + id
	return &s, nil
}

func compiled(id string) (*jsonschema.Resolved, error) {
	once.Do(load)
	if loadErr != nil {
		return nil, loadErr
	}
	mu.Lock()
	defer mu.Unlock()
	if r, ok := resolved[id]; ok {
		return r, nil
	}
	b, ok := raw[id]
	if !ok {
		return nil, fmt.Errorf("no published schema %s", id)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("schema %s: %w", id, err)
	}
	s.ID = Base + id
	r, err := s.Resolve(&jsonschema.ResolveOptions{Loader: loader})
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", id, err)
	}
	resolved[id] = r
	return r, nil
}

// Validate checks the JSON document doc against the schema id. A document
// that does not satisfy it gives an *Error naming the path at fault.
func Validate(id string, doc []byte) error {
	r, err := compiled(id)
	if err != nil {
		return err
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return &Error{ID: id, Reason: "not valid JSON"}
	}
	return ValidateValue(id, r, v)
}

// ValidateValue is Validate for an already decoded document.
func ValidateValue(id string, r *jsonschema.Resolved, v any) error {
	if r == nil {
		var err error
		if r, err = compiled(id); err != nil {
			return err
		}
	}
	err := r.Validate(v)
	if err == nil {
		return nil
	}
	p, reason := Locate(err)
	return &Error{ID: id, Path: p, Reason: reason}
}

// Locate turns an error of github.com/google/jsonschema-go into the JSON
// path of the instance at fault and the reason. The library names the
// schema location ("validating /properties/b/items/properties/c: type: ...");
// the instance path follows from it: a property name per "properties/x",
// "[]" per "items" (the library does not say which element). Through a
// "$ref" to another schema (a location that is a URL), the path within
// the referring schema comes first.
func Locate(err error) (jsonPath, reason string) {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	var b strings.Builder
	last := ""
	for {
		i := strings.Index(msg, "validating ")
		if i < 0 {
			break
		}
		rest := msg[i+len("validating "):]
		j := strings.Index(rest, ": ")
		if j < 0 {
			break
		}
		loc := rest[:j]
		if !strings.HasPrefix(loc, "/") && last != "" { // into a referenced schema
			appendInstancePath(&b, last)
			last = ""
		} else if strings.HasPrefix(loc, "/") {
			last = loc
		}
		msg = rest[j+2:]
	}
	appendInstancePath(&b, last)
	// "required: missing properties: [\"a\"]" names the field.
	if strings.HasPrefix(msg, "required: missing properties: ") {
		names := strings.Trim(strings.TrimPrefix(msg, "required: missing properties: "), "[]")
		first := strings.Trim(strings.SplitN(names, " ", 2)[0], `"`)
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(first)
		return b.String(), "required"
	}
	if strings.HasPrefix(msg, "additionalProperties: ") || strings.Contains(msg, "unexpected additional properties") {
		if k := strings.Index(msg, `"`); k >= 0 {
			name := strings.SplitN(msg[k+1:], `"`, 2)[0]
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(name)
			return b.String(), "unknown field"
		}
	}
	return b.String(), msg
}

// appendInstancePath appends the instance path of the schema location loc
// ("/properties/a/items/properties/b") to b.
func appendInstancePath(b *strings.Builder, loc string) {
	if loc == "" {
		return
	}
	segs := strings.Split(strings.TrimPrefix(loc, "/"), "/")
	for i := 0; i < len(segs); i++ {
		switch segs[i] {
		case "properties", "patternProperties":
			if i+1 < len(segs) {
				if b.Len() > 0 {
					b.WriteByte('.')
				}
				b.WriteString(strings.NewReplacer("~1", "/", "~0", "~").Replace(segs[i+1]))
				i++
			}
		case "items", "additionalItems", "prefixItems":
			b.WriteString("[]")
		case "additionalProperties":
			// the property is named in the reason
		}
	}
}

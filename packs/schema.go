package packs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
)

//go:embed schema/pack.schema.json
var packSchema []byte

// SchemaID is the $id of the published pack.json schema.
const SchemaID = "urn:packrun:schema:pack.json:v1"

// Schema returns the JSON Schema (draft 2020-12) of pack.json, a copy of
// packs/schema/pack.schema.json. It describes the shape of a manifest; the
// rules that span fields (module references, unique task types across
// nodes, grants that need a service, the served ABI versions) are checked by
// DecodeManifest and Validate only.
func Schema() []byte { return bytes.Clone(packSchema) }

// JSONSchema is a compiled JSON Schema 2020-12 document, such as a node's
// inputSchema or outputSchema.
type JSONSchema struct {
	r *jsonschema.Resolved
	// fast checks documents first when the schema is a plain shape
	// (schemafast.go); nil otherwise.
	fast *fastSchema
}

// refuseExternal is the loader of every schema a pack carries: its schemas
// must be self-contained, and compiling one must never reach the network or
// the file system.
func refuseExternal(u *url.URL) (*jsonschema.Schema, error) {
	return nil, fmt.Errorf("external reference %s is not allowed; schemas must be self-contained", u)
}

// CompileSchema compiles raw as JSON Schema 2020-12. A "$schema" member, if
// present, must name draft 2020-12. References outside the document are
// refused. Besides what the compiler checks (keyword value types, regular
// expressions, references), the constraints of the 2020-12 meta-schema the
// compiler does not apply are checked here (see checkMeta), so a schema is
// refused when it is written, not ignored when it is used.
//
// The compiler is github.com/google/jsonschema-go, whose package
// initialisation is cheap: every packrun command links this package, and
// most never compile a schema.
func CompileSchema(raw []byte) (*JSONSchema, error) {
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	switch d := doc.(type) {
	case bool:
	case map[string]any:
		if s, ok := d["$schema"]; ok && s != draft2020 && s != draft2020+"#" {
			return nil, fmt.Errorf("$schema must be %q (JSON Schema 2020-12)", draft2020)
		}
	default:
		return nil, errors.New("a JSON Schema must be an object or a boolean")
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema 2020-12: %s", decodeErr(err))
	}
	if err := checkMeta(&s, doc, "#"); err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema 2020-12: %w", err)
	}
	r, err := s.Resolve(&jsonschema.ResolveOptions{Loader: refuseExternal})
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema 2020-12: %s", schemaErr(err))
	}
	if err := checkLoops(&s); err != nil {
		return nil, err
	}
	fast, _ := compileFast(doc, 0)
	return &JSONSchema{r: r, fast: fast}, nil
}

// SchemaError is a document a schema refused. Err is the validator's own
// error (github.com/google/jsonschema-go), from which host/schema.Locate
// finds the JSON path at fault; Error is its message on one line.
type SchemaError struct{ Err error }

func (e *SchemaError) Error() string { return schemaErr(e.Err) }

// Unwrap returns the validator's error.
func (e *SchemaError) Unwrap() error { return e.Err }

// Validate checks the JSON document doc against the schema. A document
// that does not satisfy it gives a *SchemaError.
func (s *JSONSchema) Validate(doc []byte) error {
	if s.fast != nil && s.fast.satisfies(doc) {
		return nil
	}
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if err := s.r.Validate(v); err != nil {
		return &SchemaError{Err: err}
	}
	return nil
}

// schemaErr flattens the library's multi-line messages to one line.
func schemaErr(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// decodeErr names the keyword whose value has the wrong JSON type, instead
// of the Go types the decoder reports.
func decodeErr(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return schemaErr(err)
	}
	want := "a schema (an object or a boolean)"
	switch t := te.Type.String(); {
	case strings.Contains(t, "struct"), strings.Contains(t, "Schema"):
	case strings.Contains(t, "float"):
		want = "a number"
	case strings.Contains(t, "int"):
		want = "an integer"
	case t == "string":
		want = "a string"
	case t == "bool":
		want = "a boolean"
	case strings.HasPrefix(t, "[]string"):
		want = "an array of strings"
	case strings.HasPrefix(t, "[]"):
		want = "an array"
	case strings.HasPrefix(t, "map["):
		want = "an object"
	}
	field := te.Field
	if i := strings.LastIndex(field, "schemaWithoutMethods."); i >= 0 {
		field = field[i+len("schemaWithoutMethods."):]
	}
	if field == "" {
		return fmt.Sprintf("a %s where %s belongs", te.Value, want)
	}
	return fmt.Sprintf("%s: must be %s, not a %s", field, want, te.Value)
}

// keywords are those the compiler reads (JSON Schema 2020-12 and the
// draft-07 spellings it also accepts).
var keywords = []string{
	"$id", "$schema", "$ref", "$comment", "$defs", "definitions", "$anchor", "$dynamicAnchor", "$dynamicRef", "$vocabulary",
	"title", "description", "default", "deprecated", "readOnly", "writeOnly", "examples",
	"type", "enum", "const", "multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
	"minLength", "maxLength", "pattern", "prefixItems", "items", "minItems", "maxItems", "additionalItems",
	"uniqueItems", "contains", "minContains", "maxContains", "unevaluatedItems",
	"minProperties", "maxProperties", "required", "dependentRequired", "properties", "patternProperties",
	"additionalProperties", "propertyNames", "unevaluatedProperties", "dependencies",
	"allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas",
	"contentEncoding", "contentMediaType", "contentSchema", "format",
}

// simpleTypes are the names "type" may use (2020-12 validation vocabulary).
var simpleTypes = []string{"array", "boolean", "integer", "null", "number", "object", "string"}

// checkMeta applies the meta-schema rules the compiler leaves unchecked to
// s and every schema inside it: type names, unique type and required lists,
// non-negative counts, a positive multipleOf. raw is s as decoded into
// plain Go values (the struct loses an empty "type"); at is the JSON Pointer
// of s, for the message.
func checkMeta(s *jsonschema.Schema, raw any, at string) error {
	if s == nil {
		return nil
	}
	types := s.Types
	if s.Type != "" {
		types = []string{s.Type}
	} else if obj, ok := raw.(map[string]any); ok && obj["type"] != nil && len(types) == 0 {
		return fmt.Errorf("%s/type: must name a type or be a non-empty list of types", at)
	}
	if obj, ok := raw.(map[string]any); ok {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			// The decoder matches struct fields ignoring case; JSON Schema
			// does not, and {"Required": [...]} is an unknown keyword there.
			if i := slices.IndexFunc(keywords, func(kw string) bool { return strings.EqualFold(kw, k) }); i >= 0 && keywords[i] != k {
				return fmt.Errorf("%s/%s: keywords are case-sensitive; write %q", at, k, keywords[i])
			}
		}
		for _, k := range []string{"$anchor", "$dynamicAnchor"} {
			if a, ok := obj[k].(string); ok && !isAnchor(a) {
				return fmt.Errorf("%s/%s: %q is not an anchor name (a letter or '_', then letters, digits, '-', '_' or '.')", at, k, a)
			}
		}
		for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
			if list, ok := obj[k].([]any); ok && len(list) == 0 {
				return fmt.Errorf("%s/%s: must not be empty", at, k)
			}
		}
	}
	if at != "#" && s.ID != "" {
		return fmt.Errorf("%s/$id: a schema inside a node schema cannot have its own $id (an embedded resource); use $defs and $ref \"#/$defs/...\"", at)
	}
	for i, t := range types {
		if !slices.Contains(simpleTypes, t) {
			return fmt.Errorf("%s/type: %q is not a type (use one of %s)", at, t, strings.Join(simpleTypes, ", "))
		}
		if slices.Contains(types[:i], t) {
			return fmt.Errorf("%s/type: %q appears twice", at, t)
		}
	}
	for i, r := range s.Required {
		if slices.Contains(s.Required[:i], r) {
			return fmt.Errorf("%s/required: %q appears twice", at, r)
		}
	}
	for _, c := range []struct {
		name string
		n    *int
	}{
		{"minLength", s.MinLength}, {"maxLength", s.MaxLength}, {"minItems", s.MinItems}, {"maxItems", s.MaxItems},
		{"minContains", s.MinContains}, {"maxContains", s.MaxContains},
		{"minProperties", s.MinProperties}, {"maxProperties", s.MaxProperties},
	} {
		if c.n != nil && *c.n < 0 {
			return fmt.Errorf("%s/%s: must not be negative", at, c.name)
		}
	}
	if s.MultipleOf != nil && *s.MultipleOf <= 0 {
		return fmt.Errorf("%s/multipleOf: must be greater than 0", at)
	}
	for key, sub := range subschemas(s) {
		if err := checkMeta(sub, rawChild(raw, key), at+"/"+key); err != nil {
			return err
		}
	}
	return nil
}

// subschemas yields the schemas directly inside s, each with its JSON
// Pointer relative to s, in a fixed order (so the problem reported first
// does not change from run to run).
func subschemas(s *jsonschema.Schema) iter.Seq2[string, *jsonschema.Schema] {
	return func(yield func(string, *jsonschema.Schema) bool) {
		for _, e := range []struct {
			key string
			sub *jsonschema.Schema
		}{
			{"items", s.Items}, {"additionalItems", s.AdditionalItems}, {"contains", s.Contains},
			{"unevaluatedItems", s.UnevaluatedItems}, {"additionalProperties", s.AdditionalProperties},
			{"propertyNames", s.PropertyNames}, {"unevaluatedProperties", s.UnevaluatedProperties},
			{"not", s.Not}, {"if", s.If}, {"then", s.Then}, {"else", s.Else}, {"contentSchema", s.ContentSchema},
		} {
			if e.sub != nil && !yield(e.key, e.sub) {
				return
			}
		}
		for _, e := range []struct {
			key  string
			list []*jsonschema.Schema
		}{
			{"prefixItems", s.PrefixItems}, {"items", s.ItemsArray}, {"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf},
		} {
			for i, sub := range e.list {
				if !yield(fmt.Sprintf("%s/%d", e.key, i), sub) {
					return
				}
			}
		}
		for _, e := range []struct {
			key string
			m   map[string]*jsonschema.Schema
		}{
			{"$defs", s.Defs}, {"definitions", s.Definitions}, {"properties", s.Properties},
			{"patternProperties", s.PatternProperties}, {"dependentSchemas", s.DependentSchemas},
			{"dependencies", s.DependencySchemas},
		} {
			for _, name := range slices.Sorted(maps.Keys(e.m)) {
				if !yield(e.key+"/"+escapePointer(name), e.m[name]) {
					return
				}
			}
		}
	}
}

// isAnchor reports whether a matches ^[A-Za-z_][-A-Za-z0-9._]*$, the
// grammar of $anchor and $dynamicAnchor.
func isAnchor(a string) bool {
	for i, r := range a {
		letter := r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z'
		if !letter && (i == 0 || !(r == '-' || r == '.' || '0' <= r && r <= '9')) {
			return false
		}
	}
	return a != ""
}

// rawChild follows the JSON Pointer tokens of key (as subschemas yields
// them) from raw.
func rawChild(raw any, key string) any {
	for tok := range strings.SplitSeq(key, "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch v := raw.(type) {
		case map[string]any:
			raw = v[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil
			}
			raw = v[i]
		default:
			return nil
		}
	}
	return raw
}

// escapePointer escapes a name as one JSON Pointer token (RFC 6901).
func escapePointer(name string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

// checkLoops refuses a schema whose evaluation could loop without
// consuming the instance: a cycle of $ref, $dynamicRef and the applicators
// that apply to the same value (allOf, anyOf, oneOf, not, if/then/else,
// dependentSchemas), such as {"$ref": "#"}. The 2020-12 specification leaves
// such schemas undefined; a compiler that follows them overflows its stack,
// which a Go program cannot recover from. CompileSchema runs it after the
// compiler has resolved every reference, and with no embedded resources
// (checkMeta refuses an inner $id), so each reference names a JSON Pointer
// or an anchor of this one document.
func checkLoops(root *jsonschema.Schema) error {
	at := map[string]*jsonschema.Schema{}      // JSON Pointer -> schema
	anchors := map[string]*jsonschema.Schema{} // $anchor and $dynamicAnchor -> schema
	where := map[*jsonschema.Schema]string{}
	var index func(s *jsonschema.Schema, ptr string)
	index = func(s *jsonschema.Schema, ptr string) {
		at[ptr], where[s] = s, ptr
		for _, a := range []string{s.Anchor, s.DynamicAnchor} {
			if a != "" {
				anchors[a] = s
			}
		}
		for key, sub := range subschemas(s) {
			index(sub, ptr+"/"+key)
		}
	}
	index(root, "")
	base, _ := url.Parse(root.ID)
	target := func(ref string) (*jsonschema.Schema, error) {
		u, err := url.Parse(ref)
		if err != nil {
			return nil, err
		}
		if base != nil {
			u = base.ResolveReference(u)
		}
		frag := u.Fragment
		u.Fragment = ""
		if u.String() != "" && (base == nil || u.String() != base.String()) {
			return nil, errors.New("not in this document")
		}
		if frag == "" || strings.HasPrefix(frag, "/") {
			if s := at[frag]; s != nil {
				return s, nil
			}
		} else if s := anchors[frag]; s != nil {
			return s, nil
		}
		return nil, errors.New("packrun cannot follow it to a schema of this document")
	}
	const (
		visiting = 1
		done     = 2
	)
	state := map[*jsonschema.Schema]int{}
	var visit func(s *jsonschema.Schema) error
	visit = func(s *jsonschema.Schema) error {
		switch state[s] {
		case visiting:
			return fmt.Errorf("not a valid JSON Schema 2020-12: #%s refers back to itself without going into the value (an endless loop of $ref or allOf/anyOf/oneOf/not/if)", where[s])
		case done:
			return nil
		}
		state[s] = visiting
		next := slices.Concat(s.AllOf, s.AnyOf, s.OneOf, []*jsonschema.Schema{s.Not, s.If, s.Then, s.Else})
		for _, name := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
			next = append(next, s.DependentSchemas[name])
		}
		for _, name := range slices.Sorted(maps.Keys(s.DependencySchemas)) {
			next = append(next, s.DependencySchemas[name])
		}
		for _, ref := range []string{s.Ref, s.DynamicRef} {
			if ref == "" {
				continue
			}
			t, err := target(ref)
			if err != nil {
				return fmt.Errorf("not a valid JSON Schema 2020-12: #%s: $ref %q: %v", where[s], ref, err)
			}
			next = append(next, t)
		}
		for _, n := range next {
			if n == nil {
				continue
			}
			if err := visit(n); err != nil {
				return err
			}
		}
		state[s] = done
		return nil
	}
	for _, ptr := range slices.Sorted(maps.Keys(at)) {
		if err := visit(at[ptr]); err != nil {
			return err
		}
	}
	return nil
}

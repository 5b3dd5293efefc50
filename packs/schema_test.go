package packs

import (
	"bytes"
	"strings"
	"testing"

	reference "github.com/santhosh-tekuri/jsonschema/v6"
)

// referenceAccepts compiles raw with github.com/santhosh-tekuri/jsonschema,
// which validates every schema against the 2020-12 meta-schema. It is a
// test-only dependency: its package initialisation costs milliseconds, which
// is why packrun itself compiles schemas with another library.
func referenceAccepts(raw []byte) bool {
	doc, err := reference.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return false
	}
	if m, ok := doc.(map[string]any); ok {
		if s, ok := m["$schema"]; ok && s != draft2020 && s != draft2020+"#" {
			return false
		}
	} else if _, ok := doc.(bool); !ok {
		return false
	}
	c := reference.NewCompiler()
	c.DefaultDraft(reference.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "https://packrun.invalid/node-schema.json"
	if c.AddResource(loc, doc) != nil {
		return false
	}
	_, err = c.Compile(loc)
	return err == nil
}

// schemaCorpus holds node schemas, valid and not; CompileSchema must agree
// with the reference compiler on every one.
var schemaCorpus = []string{
	`true`, `false`, `{}`,
	`{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"string","minLength":1}}}`,
	`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":["string","null"]}`,
	`{"$defs":{"n":{"type":"integer","minimum":0}},"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":3}`,
	`{"prefixItems":[{"type":"string"},{"const":1}],"items":false,"contains":{"enum":[1,2]},"minContains":0}`,
	`{"oneOf":[{"multipleOf":0.5},{"not":{"type":"null"}}],"if":{"type":"string"},"then":{"pattern":"^a"},"else":{}}`,
	`{"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false,"propertyNames":{"maxLength":8}}`,
	`{"dependentSchemas":{"a":{"required":["b"]}},"dependentRequired":{"a":["c"]},"unevaluatedProperties":false}`,
	`{"$id":"https://packrun.invalid/x.json","$anchor":"top","properties":{"next":{"$ref":"#top"}}}`,
	`{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}}}}`,
	`{"$defs":{"a":{"properties":{"b":{"$ref":"#/$defs/b"}}},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`,
	`{"$defs":{"a b":{"type":"string"},"c/d":{"type":"null"}},"anyOf":[{"$ref":"#/$defs/a%20b"},{"$ref":"#/$defs/c~1d"}]}`,
	`{"format":"email","contentEncoding":"base64","contentMediaType":"application/json","examples":[1,"a"]}`,
	`{"x-unknown-keyword":{"anything":[1,2]}}`,
	// refused
	`[]`, `1`, `"string"`, `null`,
	`{"$schema":"http://json-schema.org/draft-07/schema#"}`,
	`{"$ref":"file:///etc/passwd"}`, `{"$ref":"other.json"}`, `{"$ref":"https://example.com/s.json"}`,
	`{"$ref":"#/$defs/missing"}`,
	`{"type":"nope"}`, `{"type":["string","string"]}`, `{"type":5}`, `{"type":[]}`,
	`{"properties":{"a":{"type":"strnig"}}}`, `{"items":{"type":"nope"}}`, `{"allOf":[{"type":"nope"}]}`,
	`{"properties":{"a":5}}`, `{"properties":[]}`, `{"items":5}`, `{"not":"x"}`,
	`{"minLength":-1}`, `{"maxItems":-3}`, `{"minProperties":1.5}`, `{"minLength":"1"}`,
	`{"multipleOf":0}`, `{"multipleOf":-2}`, `{"minimum":"0"}`,
	`{"required":"a"}`, `{"required":["a","a"]}`, `{"required":[1]}`,
	`{"pattern":"("}`, `{"patternProperties":{"(":{}}}`, `{"enum":5}`,
	`{"$defs":{"a":{"$defs":{"b":{"maxLength":-1}}}}}`,
	// found by fuzzing CompileSchema against the reference compiler
	`{"type":""}`, `{"allOf":[]}`, `{"prefixItems":[]}`, `{"$anchor":""}`, `{"$anchor":"1a"}`, `{"$dynamicAnchor":"a b"}`,
}

// loopingSchemas refer back to themselves without going into the value.
// They are valid 2020-12 documents whose evaluation the specification
// leaves undefined; a compiler that follows them overflows its stack and
// kills the process, so CompileSchema refuses them.
var loopingSchemas = []string{
	`{"$ref":"#"}`,
	`{"$anchor":"top","$ref":"#top"}`,
	`{"allOf":[{"$ref":"#"}]}`,
	`{"properties":{"a":{"not":{"$ref":"#/properties/a"}}}}`,
	`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`,
	`{"$dynamicAnchor":"node","if":{"$dynamicRef":"#node"}}`,
	`{"dependentSchemas":{"x":{"$ref":"#"}}}`,
}

func TestLoopingSchemasAreRefused(t *testing.T) {
	for _, raw := range loopingSchemas {
		_, err := CompileSchema([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), "refers back to itself") {
			t.Errorf("%s: got %v, want the loop refused", raw, err)
		}
		// A deliberate difference: they are valid 2020-12 documents.
		if !referenceAccepts([]byte(raw)) {
			t.Errorf("%s: the reference compiler refuses it; move it to schemaCorpus", raw)
		}
	}
}

// An inner $id (an embedded resource) is refused with a message saying
// what to write instead; packrun resolves references within one document.
func TestEmbeddedResourceRefused(t *testing.T) {
	_, err := CompileSchema([]byte(`{"$defs":{"a":{"$id":"https://example.com/a.json","type":"string"}}}`))
	if err == nil || !strings.Contains(err.Error(), "#/$defs/a/$id") || !strings.Contains(err.Error(), `use $defs and $ref`) {
		t.Errorf("got %v", err)
	}
}

func TestCompileSchemaAgreesWithTheReference(t *testing.T) {
	for _, raw := range schemaCorpus {
		_, err := CompileSchema([]byte(raw))
		if got, want := err == nil, referenceAccepts([]byte(raw)); got != want {
			t.Errorf("%s: CompileSchema accepted=%v (%v), the reference compiler accepted=%v", raw, got, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", raw, err)
		}
	}
}

// Refusals name the keyword at fault and say what it must be, not the Go
// types of the decoder.
func TestCompileSchemaErrors(t *testing.T) {
	for raw, want := range map[string]string{
		`{"properties":{"a":{"type":"strnig"}}}`:                `#/properties/a/type: "strnig" is not a type`,
		`{"minLength":-1}`:                                      `#/minLength: must not be negative`,
		`{"multipleOf":0}`:                                      `#/multipleOf: must be greater than 0`,
		`{"required":["a","a"]}`:                                `#/required: "a" appears twice`,
		`{"minimum":"0"}`:                                       `minimum: must be a number, not a string`,
		`{"properties":{"a":5}}`:                                `must be a schema (an object or a boolean), not a number`,
		`{"$ref":"other.json"}`:                                 `is not allowed; schemas must be self-contained`,
		`{"Required":["a"]}`:                                    `#/Required: keywords are case-sensitive; write "required"`,
		`{"$schema":"http://json-schema.org/draft-07/schema#"}`: `$schema must be "https://json-schema.org/draft/2020-12/schema"`,
	} {
		_, err := CompileSchema([]byte(raw))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", raw, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), "struct {") || strings.Contains(err.Error(), "schemaWithoutMethods")) {
			t.Errorf("%s: error names Go types: %v", raw, err)
		}
	}
}

// FuzzCompileSchema: any bytes either compile or are refused with one line,
// and a compiled schema validates any document without panicking.
func FuzzCompileSchema(f *testing.F) {
	for _, raw := range schemaCorpus {
		f.Add([]byte(raw), []byte(`{"a":[1,"x",null]}`))
	}
	f.Fuzz(func(t *testing.T, raw, doc []byte) {
		s, err := CompileSchema(raw)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if err := s.Validate(doc); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("validation error is not one line: %q", err)
		}
	})
}

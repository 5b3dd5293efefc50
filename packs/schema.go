package packs

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
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
	s *jsonschema.Schema
}

// noLoader refuses every external reference: a pack's schemas must be
// self-contained, and compiling one must never reach the network or the
// file system.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external reference %s is not allowed; schemas must be self-contained", url)
}

// CompileSchema compiles raw as JSON Schema 2020-12. A "$schema" member, if
// present, must name draft 2020-12. References outside the document are
// refused.
func CompileSchema(raw []byte) (*JSONSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
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
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "https://packrun.invalid/node-schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema 2020-12: %s", schemaErr(err))
	}
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("not a valid JSON Schema 2020-12: %s", schemaErr(err))
	}
	return &JSONSchema{s: s}, nil
}

// Validate checks the JSON document doc against the schema.
func (s *JSONSchema) Validate(doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	if err := s.s.Validate(v); err != nil {
		return errors.New(schemaErr(err))
	}
	return nil
}

// schemaErr flattens the library's multi-line messages to one line.
func schemaErr(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

package host

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/packrun/packrun/host/schema"
	"github.com/packrun/packrun/internal/textclip"
)

// IntentSchema is the id of the published TaskIntent schema DecodeIntent
// validates with first.
const IntentSchema = "agent-runtime/task.intent/v1"

// schemaInvalid turns a document's *schema.Error into a validation *Error
// naming the field at its JSON path, with a short reason.
func schemaInvalid(op string, err error) error {
	var se *schema.Error
	if !errors.As(err, &se) {
		return err // the schema itself failed: a bug, not the caller's
	}
	return Invalid(op, ShortName(se.Path), "%s", schemaReason(se.Reason))
}

// schemaReason words a reason of github.com/google/jsonschema-go as the
// rest of packrun's validation errors are worded, bounded in size.
func schemaReason(r string) string {
	kw, rest, _ := strings.Cut(r, ": ")
	switch kw {
	case "type":
		if _, want, ok := strings.Cut(rest, `want "`); ok {
			want = strings.TrimSuffix(want, `"`)
			article := "a "
			if want == "integer" || want == "object" || want == "array" {
				article = "an "
			}
			return "must be " + article + want
		}
	case "minLength":
		return "must not be empty"
	case "maxLength", "maxItems", "minimum", "maximum", "pattern", "enum", "const":
		return kw + ": " + textclip.Clip(rest, 160)
	}
	return textclip.Clip(r, 200)
}

// WithSource returns the intent object b with source set to source when b
// names none (a follow-up's source is its parent, an API intent's is
// "api"); b as given otherwise, or when it is not an object (DecodeIntent
// then says what is wrong).
func WithSource(b []byte, source string) []byte {
	var fields map[string]json.RawMessage
	if json.Unmarshal(b, &fields) != nil || fields == nil {
		return b
	}
	if _, ok := fields["source"]; ok {
		return b
	}
	src, _ := json.Marshal(source)
	fields["source"] = src
	out, err := json.Marshal(fields)
	if err != nil {
		return b
	}
	return out
}

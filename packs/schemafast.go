package packs

import (
	"strconv"

	"github.com/packrun/packrun/abi"
)

// A node's contract is most often a shape: an object whose properties have
// types, some of them required. Checking a document against such a schema
// with the general validator means decoding it into maps and interfaces
// first (≈ 25 allocations and 2–3 µs for a hello node's input or output,
// on every attempt and every replay). fastSchema checks the same shape on
// the document's bytes, allocating nothing. It is an accelerator, never a
// judge: it answers "satisfies" only when the general validator would, and
// anything else (a keyword outside its subset, a key written with an
// escape, a number it cannot read as the decoder would) makes Validate ask
// the general validator, which also writes the error. FuzzFastSchema holds
// it to that.

// JSON types, as bits of fastSchema.types.
const (
	jsonNull uint8 = 1 << iota
	jsonBoolean
	jsonObject
	jsonArray
	jsonNumber
	jsonString
)

var fastTypes = map[string]uint8{
	"null": jsonNull, "boolean": jsonBoolean, "object": jsonObject,
	"array": jsonArray, "number": jsonNumber, "string": jsonString,
}

// fastSchema is a schema of the subset: type (without "integer"),
// properties, required, additionalProperties, items (one schema), the
// boolean schemas and annotations.
type fastSchema struct {
	never    bool  // the false schema
	types    uint8 // allowed JSON types; 0: any
	props    map[string]*fastSchema
	required []string    // at most 64
	extra    *fastSchema // additionalProperties; nil: any
	items    *fastSchema // nil: any
}

// fastAnnotations are keywords that do not change what a document must be.
var fastAnnotations = map[string]bool{
	"$schema": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// maxFastDepth bounds the nesting of a schema, or of a document, the fast
// path follows; deeper ones go to the general validator.
const maxFastDepth = 64

// compileFast returns the fast form of a decoded schema, or false when the
// schema uses anything outside the subset.
func compileFast(doc any, depth int) (*fastSchema, bool) {
	if depth > maxFastDepth {
		return nil, false
	}
	switch d := doc.(type) {
	case bool:
		return &fastSchema{never: !d}, true
	case map[string]any:
		f := &fastSchema{}
		for k, v := range d {
			switch {
			case fastAnnotations[k]:
			case k == "type":
				if !f.setTypes(v) {
					return nil, false
				}
			case k == "properties":
				m, ok := v.(map[string]any)
				if !ok {
					return nil, false
				}
				f.props = make(map[string]*fastSchema, len(m))
				for name, sub := range m {
					if f.props[name], ok = compileFast(sub, depth+1); !ok {
						return nil, false
					}
				}
			case k == "required":
				list, ok := v.([]any)
				if !ok || len(list) > 64 {
					return nil, false
				}
				for _, r := range list {
					name, ok := r.(string)
					if !ok {
						return nil, false
					}
					f.required = append(f.required, name)
				}
			case k == "additionalProperties":
				var ok bool
				if f.extra, ok = compileFast(v, depth+1); !ok {
					return nil, false
				}
			case k == "items":
				var ok bool
				if f.items, ok = compileFast(v, depth+1); !ok {
					return nil, false
				}
			default:
				return nil, false
			}
		}
		return f, true
	}
	return nil, false
}

func (f *fastSchema) setTypes(v any) bool {
	add := func(t any) bool {
		name, ok := t.(string)
		bit := fastTypes[name]
		if !ok || bit == 0 || f.types&bit != 0 {
			return false
		}
		f.types |= bit
		return true
	}
	switch t := v.(type) {
	case string:
		return add(t)
	case []any:
		if len(t) == 0 {
			return false
		}
		for _, e := range t {
			if !add(e) {
				return false
			}
		}
		return true
	}
	return false
}

// satisfies reports whether doc is one JSON value that the schema accepts
// for sure; false means "ask the general validator".
func (f *fastSchema) satisfies(doc []byte) bool {
	if !abi.ValidJSON(doc) {
		return false
	}
	s := scan{b: doc}
	s.space()
	return f.value(&s, 0) && s.space() == len(doc)
}

// scan walks a document abi.ValidJSON accepted.
type scan struct {
	b []byte
	i int
}

func (s *scan) space() int {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return s.i
		}
	}
	return s.i
}

// str reads a string from its opening quote and returns what is between
// the quotes, and whether it holds an escape.
func (s *scan) str() ([]byte, bool) {
	start := s.i + 1
	escaped := false
	for s.i = start; s.b[s.i] != '"'; s.i++ {
		if s.b[s.i] == '\\' {
			escaped = true
			s.i++
		}
	}
	s.i++
	return s.b[start : s.i-1], escaped
}

// value checks the value at s.i against f (nil: any) and moves past it.
func (f *fastSchema) value(s *scan, depth int) bool {
	if depth > maxFastDepth || (f != nil && f.never) {
		return false
	}
	var typ uint8
	switch c := s.b[s.i]; {
	case c == '{':
		typ = jsonObject
	case c == '[':
		typ = jsonArray
	case c == '"':
		typ = jsonString
	case c == 't' || c == 'f':
		typ = jsonBoolean
	case c == 'n':
		typ = jsonNull
	default:
		typ = jsonNumber
	}
	if f != nil && f.types != 0 && f.types&typ == 0 {
		return false
	}
	switch typ {
	case jsonObject:
		return f.object(s, depth)
	case jsonArray:
		var items *fastSchema
		if f != nil {
			items = f.items
		}
		s.i++
		if s.space(); s.b[s.i] == ']' {
			s.i++
			return true
		}
		for {
			if !items.value(s, depth+1) {
				return false
			}
			s.space()
			if s.b[s.i] == ']' {
				s.i++
				return true
			}
			s.i++ // ','
			s.space()
		}
	case jsonString:
		s.str()
	case jsonBoolean:
		if s.b[s.i] == 't' {
			s.i += 4
		} else {
			s.i += 5
		}
	case jsonNull:
		s.i += 4
	default:
		start := s.i
		for s.i < len(s.b) && isNumberByte(s.b[s.i]) {
			s.i++
		}
		// The general validator decodes numbers as float64: one out of
		// its range is an error there.
		if _, err := strconv.ParseFloat(string(s.b[start:s.i]), 64); err != nil {
			return false
		}
	}
	return true
}

func isNumberByte(c byte) bool {
	return c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

// object checks the object at s.i against f (nil: any).
func (f *fastSchema) object(s *scan, depth int) bool {
	var seen uint64 // f.required[i] seen
	s.i++
	if s.space(); s.b[s.i] != '}' {
		for {
			key, escaped := s.str()
			if escaped {
				return false // compared unescaped by the general validator
			}
			s.space()
			s.i++ // ':'
			s.space()
			var sub *fastSchema
			if f != nil {
				known := false
				if sub, known = f.props[string(key)]; !known {
					sub = f.extra
				}
				for i, r := range f.required {
					if r == string(key) {
						seen |= 1 << i
					}
				}
			}
			if !sub.value(s, depth+1) {
				return false
			}
			s.space()
			if s.b[s.i] == '}' {
				break
			}
			s.i++ // ','
			s.space()
		}
	}
	s.i++
	return f == nil || seen == 1<<len(f.required)-1
}

// Package strictjson parses untrusted JSON documents (pack.json,
// adapters.json) into generic values for validators that report every
// problem by its JSON path: numbers stay json.Number, objects keep their key
// order, and duplicate keys are reported instead of silently merged. Check
// only validates a document, the same strict way, in one pass that builds
// nothing (for the HTTP API's request bodies).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/packrun/packrun/internal/textclip"
)

// maxPathKey bounds the bytes of one key echoed in a path.
const maxPathKey = 64

// Object is a JSON object with its keys in document order.
type Object struct {
	Keys []string
	Vals map[string]any
}

// MarshalJSON writes the object with its keys in document order.
func (o *Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.Keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(o.Vals[k])
		if err != nil {
			return nil, err
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// Parse decodes one JSON value into *Object, []any, string, json.Number,
// bool and nil. A duplicate key is passed to dup with its path (the first
// value is kept); invalid UTF-8, syntax errors, nesting deeper than
// maxDepth and data after the value are errors.
func Parse(b []byte, maxDepth int, dup func(path string)) (any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("not valid UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	p := parser{d: d, maxDepth: maxDepth, dup: dup}
	v, err := p.value("$", 0)
	if err == io.EOF { // the document ended inside a value
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the top-level value")
	}
	return v, nil
}

type parser struct {
	d        *json.Decoder
	maxDepth int
	dup      func(string)
}

func (p *parser) value(path string, depth int) (any, error) {
	if depth > p.maxDepth {
		return nil, fmt.Errorf("nested more than %d levels deep at %s", p.maxDepth, path)
	}
	tok, err := p.d.Token()
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := &Object{Vals: map[string]any{}}
		for p.d.More() {
			kt, err := p.d.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key expected at %s", path)
			}
			kp := FieldPath(path, k)
			v, err := p.value(kp, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := obj.Vals[k]; dup {
				if p.dup != nil {
					p.dup(kp)
				}
				continue
			}
			obj.Keys = append(obj.Keys, k)
			obj.Vals[k] = v
		}
		if _, err := p.d.Token(); err != nil { // '}'
			return nil, err
		}
		return obj, nil
	case json.Delim('['):
		arr := []any{}
		for i := 0; p.d.More(); i++ {
			v, err := p.value(IndexPath(path, i), depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := p.d.Token(); err != nil { // ']'
			return nil, err
		}
		return arr, nil
	}
	if _, ok := tok.(json.Delim); ok {
		return nil, fmt.Errorf("unexpected %v at %s", tok, path)
	}
	return tok, nil
}

var identKey = lazyRegexp(`^[A-Za-z_$][A-Za-z0-9_$]*$`)

// FieldPath is the path of key under parent: $.a.b, or $["odd key"].
//
// The key comes from untrusted input, so a long one is clipped: a refusal
// names the field without echoing all of it.
func FieldPath(parent, key string) string {
	key = textclip.Clip(key, maxPathKey)
	if identKey().MatchString(key) {
		return parent + "." + key
	}
	return parent + "[" + strconv.Quote(key) + "]"
}

// IndexPath is the path of element i under parent: $.a[3].
func IndexPath(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

// TypeName names the JSON type of a parsed value for messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case *Object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

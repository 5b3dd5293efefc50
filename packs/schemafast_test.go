package packs

import (
	"encoding/json"
	"testing"
)

// fastCorpus are schemas the fast path takes, with documents on both sides
// of them.
var fastCorpus = []struct {
	schema string
	ok     []string
	refuse []string
}{
	{`{"type":"object","properties":{"name":{"type":"string"}}}`,
		[]string{`{"name":"x"}`, `{}`, ` { "other" : [1, {"a":null}] } `, `{"name":"a\"b\\c"}`},
		[]string{`{"name":1}`, `[]`, `"x"`, `{"name":null}`}},
	{`{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"string"}},"additionalProperties":false}`,
		[]string{`{"greeting":"Hello, x!"}`},
		[]string{`{}`, `{"greeting":"x","extra":1}`, `{"greeting":true}`}},
	{`{"type":["array","null"],"items":{"type":"number"}}`,
		[]string{`null`, `[]`, `[1, -2.5e3, 0]`},
		[]string{`[1,"2"]`, `{}`, `[1e400]`}},
	{`{"properties":{"a":false},"additionalProperties":{"type":"boolean"}}`,
		[]string{`{"b":true}`, `3`, `"s"`},
		[]string{`{"a":1}`, `{"b":1}`}},
	{`true`, []string{`1`, `{"x":[]}`}, nil},
	{`false`, nil, []string{`1`, `{}`}},
}

// The fast path agrees with the general validator on the shapes it takes,
// and leaves to it every schema it does not.
func TestFastSchema(t *testing.T) {
	for _, c := range fastCorpus {
		s, err := CompileSchema([]byte(c.schema))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		if s.fast == nil {
			t.Fatalf("%s: no fast path", c.schema)
		}
		for _, doc := range c.ok {
			if !s.fast.satisfies([]byte(doc)) {
				t.Errorf("%s: fast path refuses %s", c.schema, doc)
			}
			if err := s.Validate([]byte(doc)); err != nil {
				t.Errorf("%s: %s: %v", c.schema, doc, err)
			}
		}
		for _, doc := range c.refuse {
			if s.fast.satisfies([]byte(doc)) {
				t.Errorf("%s: fast path accepts %s", c.schema, doc)
			}
			if err := s.Validate([]byte(doc)); err == nil {
				t.Errorf("%s: %s accepted", c.schema, doc)
			}
		}
	}
	for _, slow := range []string{
		`{"type":"integer"}`, `{"type":"string","minLength":2}`, `{"$ref":"#/$defs/a","$defs":{"a":true}}`,
		`{"type":"object","properties":{"a":{"type":"string","format":"email"}}}`, `{"items":[true]}`,
	} {
		s, err := CompileSchema([]byte(slow))
		if err != nil {
			t.Fatalf("%s: %v", slow, err)
		}
		if s.fast != nil {
			t.Errorf("%s: a fast path for a keyword outside its subset", slow)
		}
	}
	// A key written with an escape, and a repeated key whose last value
	// is the one decoded, are left to the general validator.
	s, err := CompileSchema([]byte(`{"properties":{"name":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if s.fast.satisfies([]byte(`{"na\u006de":1}`)) {
		t.Error("an escaped key was compared as written")
	}
	if err := s.Validate([]byte(`{"na\u006de":1}`)); err == nil {
		t.Error("an escaped key that names a property escaped its schema")
	}
	if err := s.Validate([]byte(`{"name":1,"name":"x"}`)); err != nil {
		t.Errorf("a repeated key: %v (the decoder keeps the last value)", err)
	}
}

// FuzzFastSchema: whatever the schema and the document, the fast path
// never accepts a document the general validator refuses.
func FuzzFastSchema(f *testing.F) {
	for _, c := range fastCorpus {
		for _, doc := range append(append([]string{}, c.ok...), c.refuse...) {
			f.Add([]byte(c.schema), []byte(doc))
		}
	}
	f.Fuzz(func(t *testing.T, raw, doc []byte) {
		s, err := CompileSchema(raw)
		if err != nil || s.fast == nil || !s.fast.satisfies(doc) {
			return
		}
		var v any
		if err := json.Unmarshal(doc, &v); err != nil {
			t.Fatalf("fast path accepts %q, which does not decode: %v", doc, err)
		}
		if err := s.r.Validate(v); err != nil {
			t.Fatalf("schema %s: fast path accepts %q, the validator refuses it: %v", raw, doc, err)
		}
	})
}

func BenchmarkValidateContract(b *testing.B) {
	in, _ := CompileSchema([]byte(`{"type":"object","properties":{"name":{"type":"string"}}}`))
	out, _ := CompileSchema([]byte(`{"type":"object","required":["greeting"],"properties":{"greeting":{"type":"string"}}}`))
	inDoc, outDoc := []byte(`{"name":"bench"}`), []byte(`{"greeting":"Hello, bench!"}`)
	for _, c := range []struct {
		name string
		fast bool
	}{{"fast", true}, {"general", false}} {
		b.Run(c.name, func(b *testing.B) {
			i, o := *in, *out
			if !c.fast {
				i.fast, o.fast = nil, nil
			}
			b.ReportAllocs()
			for b.Loop() {
				if i.Validate(inDoc) != nil || o.Validate(outDoc) != nil {
					b.Fatal("refused")
				}
			}
		})
	}
}
